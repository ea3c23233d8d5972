"""The service's own history replayed in the simulator: export, fit, what-if (docs/whatif.md).

``history`` reads a service without writing to it, ``export`` turns its jobs into a trace, ``fit`` fits a
world to their reports, ``whatif`` replays them under other policies (``dlsched.whatif`` from Python).
"""
