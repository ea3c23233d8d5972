"""What schedulers believe and learn: throughput and goodput models, PM-scores, classifiers.

Estimators see only what a real cluster reports (requests, observations in the ClusterView, offline
profiles); they never import the world or the simulator.
"""
