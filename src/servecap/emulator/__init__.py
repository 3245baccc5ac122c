"""An OpenAI-compatible server whose timing is servecap's engine model driven by the wall clock.

``create_app(...)`` builds the ASGI app; :mod:`servecap.emulator.driver` steps the simulator's
:class:`servecap.sim.Engine` in real time and hands each step's tokens to the streams.
"""
