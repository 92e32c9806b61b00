"""Running inside the sandbox: the supervisor (PID 1), its children, their channels and output."""
