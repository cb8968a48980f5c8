"""The health-worker role: schedules BR-006 health checks, runs them, and drives reconnects."""
