"""Gradient-free population trainers: perturbations, scoring, RandOpt and CoRP with its stages."""
