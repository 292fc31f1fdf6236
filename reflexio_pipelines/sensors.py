"""Sensor: newly landed files (and held-back turns that fell due) become runs of `learn_job` for their window.

Its runs hold back an incomplete window of a session that is still active (`flush="due"`, see
learning/windows.py), so running every 15 s under steady traffic costs the same LLM calls as one pass.
"""


import dagster as dg

from reflexio_pipelines.jobs import learn_job, learning_run_config
from reflexio_pipelines.partitions import GRANULARITY
from reflexio_pipelines.pending import pending_windows
from reflexio_pipelines.resources import LakeResource


@dg.sensor(
    job=learn_job,
    minimum_interval_seconds=15,
    default_status=dg.DefaultSensorStatus.RUNNING,
    description="Requests a learn_job run for every window whose landing files changed since it was last compacted.",
)
def landing_sensor(context: dg.SensorEvaluationContext, lake: LakeResource) -> dg.SensorResult:
    pending = pending_windows(lake.get(), GRANULARITY)
    # The run key names the exact file set, so a window is requested once per new set of files even though
    # this sensor keeps no cursor: the lake, not the sensor, is the state.
    requests = [
        dg.RunRequest(run_key=f"{p.partition_key}:{p.digest}", partition_key=p.partition_key, run_config=learning_run_config("due"))
        for p in pending
    ]
    if not requests:
        return dg.SensorResult(skip_reason="no new landing files")
    return dg.SensorResult(run_requests=requests)
