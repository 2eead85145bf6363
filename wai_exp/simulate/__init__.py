"""simulate: situations, the mock world, agents, and the engine behind ``simulate()``.

``wai_exp.simulate`` (the attribute of ``wai_exp``) is always the function
``wai_exp.simulate.engine.simulate``: ``wai_exp`` keeps it bound whatever was imported
first. Reach this package's modules with ``from wai_exp.simulate.<module> import <name>``.
"""
