"""The example as a verifiers v1 taskset (verifiers >= 0.3.1: ``import verifiers.v1``).

Resolved by id: ``env_id: evalgate-arith`` imports this module, whose ``__all__`` exports exactly
one ``Taskset`` subclass (verifiers' ``utils.loaders._plugin_class`` rule).
"""

from evalgate_arith.taskset import ArithTaskset

__all__ = ["ArithTaskset"]
