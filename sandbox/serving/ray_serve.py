"""``rlvr serve --ray``: the reward server as a Ray Serve application, N replicas behind one URL.

Ray Serve is what operators of verl / OpenRLHF clusters already run (KubeRay's ``RayService``):
it load-balances HTTP across replicas on any node, restarts dead ones and scales them. Each
replica builds the ordinary ``rlvr serve`` FastAPI app (``rlvr.sandbox.serving.server.create_app``: same
endpoints, caps, token and metrics) with its own warm ``GradingService``, so a reward from the
cluster is the grade of the same function in process.
"""

from __future__ import annotations

from typing import Any

from rlvr.sandbox.serving.server import ServerConfig, create_app


class RewardServer:
    """One replica: builds its app (and grading service) at replica start; the app holds threads and
    processes, so it is never pickled from the driver."""

    def __init__(self, config: ServerConfig):
        self.config = config

    def __serve_build_asgi_app__(self) -> Any:
        return create_app(self.config)


def build(config: ServerConfig, replicas: int, cpus_per_replica: float = 1.0) -> Any:
    """The bound Ray Serve application (``serve.run(build(...))``)."""
    from ray import serve

    config.validate()
    deployment = serve.deployment(
        serve.ingress()(RewardServer),
        name="rlvr-reward-server",
        num_replicas=replicas,
        ray_actor_options={"num_cpus": cpus_per_replica},
    )
    return deployment.bind(config)


def run(config: ServerConfig, replicas: int, address: str | None = None, cpus_per_replica: float = 1.0) -> str:
    """Deploy on the cluster at ``address`` (see ``rlvr.sandbox.serving.ray_grading.connect``); returns the URL."""
    from ray import serve
    from rlvr.sandbox.serving.ray_grading import connect

    connect(address)
    serve.start(http_options={"host": config.host, "port": config.port})
    serve.run(build(config, replicas, cpus_per_replica), name="rlvr-reward", route_prefix="/")
    return f"http://{config.host}:{config.port}"
