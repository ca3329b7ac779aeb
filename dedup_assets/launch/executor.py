"""The definitions' executor: Dagster's in-process executor, which first compiles the kernels when
numba's cache lacks them (``warm.warm_if_needed``), saying so in the run's log, and then says of
any step that compiled all the same. So a run launched by ``dagster asset materialize``, ``dg
launch`` or the UI never compiles inside a step, even after a plain ``pip install``.
(``dedup run`` executes in process with Dagster's own executor and does the same itself.)"""

from __future__ import annotations

from collections.abc import Iterator

from dagster import Executor, executor, in_process_executor

from .user_messages import hide_refusal_tracebacks
from .warm import CompileWatch, step_compiled, warm_if_needed


class WarmingExecutor(Executor):
    def __init__(self, inner: Executor) -> None:
        self.inner = inner

    @property
    def retries(self):
        return self.inner.retries

    @property
    def step_dependency_config(self):
        return self.inner.step_dependency_config

    def execute(self, plan_context, execution_plan) -> Iterator:
        hide_refusal_tracebacks(plan_context.log)  # the run's failure repeats a step's refusal
        warm_if_needed(plan_context.log.info)
        watch = CompileWatch()
        for event in self.inner.execute(plan_context, execution_plan):
            yield event
            if event.is_step_success or event.is_step_failure:
                compiled = watch.new()
                if compiled:
                    plan_context.log.warning(step_compiled(event.step_key, compiled))


# the in-process executor's name and config, so run config and the launchpad read as before
@executor(
    name=in_process_executor.name,
    config_schema=in_process_executor.config_schema,
)
def warming_in_process_executor(init_context) -> WarmingExecutor:
    return WarmingExecutor(in_process_executor.executor_creation_fn(init_context))
