"""Delegates: planners the cascade can try. Each solves a `PlanRequest` before a deadline, hard."""
