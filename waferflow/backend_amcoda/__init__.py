"""The AMCoDA seed machine: its actor programs, generated plans, and a cycle-level simulator."""
