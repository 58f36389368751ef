"""The serving-engine loop over a cache: scheduler, reference model and data oracle, trace replay, simulation."""
