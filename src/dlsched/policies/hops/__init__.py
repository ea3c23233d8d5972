"""Hops (SoCC'24): latency-ratio queue, service window, location-specific configurations, priority-weighted ILP."""
