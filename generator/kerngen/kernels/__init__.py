"""Kernel builders: parameters and schedules in, instruction lists out."""
