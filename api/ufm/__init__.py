"""The UFM-compatible PKey API: UFM's PKey REST routes in front of isofabric's verified engine.

The schedulers and controllers of GPU clouds (ib-kubernetes, Slurm's UFM integration, NVIDIA's
infra-controller, networking-mlnx-baremetal, nv-config-manager) speak UFM's PKey REST API
(UFM REST API Guide, "PKey GUIDs REST API"). These routes serve it under ``/ufmRest`` (HTTP Basic),
``/ufmRestV2`` (after ``POST /dologin``), ``/ufmRestV3`` (``Authorization: Basic <token>``) and
``/ufmRestKrb`` (501), each also as ``/fabrics/{fabric}/ufmRest…``; every write is an isofabric
change (tenancy/usecases/ufm_facade.py). docs/integrators/orchestrators.md is the user's guide.
"""

from api.ufm.routes import ROUTERS, install_ufm_api

__all__ = ["ROUTERS", "install_ufm_api"]
