"""Isolation: namespaces, the read-only root, cgroups, seccomp, the zygote and its slots."""
