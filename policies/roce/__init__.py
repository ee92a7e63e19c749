"""RoCEv2 with BGP EVPN-VXLAN: VRF segments, their verification, and the files per leaf.

SONiC config_db.json and FRR frr.conf per leaf, and the parsers that read deployed files back.

Imports only the shared engine modules; never `policies.infiniband`.
"""

from policies.roce.bundle import render_roce_artifacts
from policies.roce.model import (
    Link,
    Nic,
    RoceQos,
    RoceSettings,
    RoceSnapshot,
    Switch,
    SwitchPort,
    SwitchRole,
    VrfSegment,
    route_target,
)
from policies.roce.parse_config_db import ParsedConfigDb, parse_config_db
from policies.roce.parse_frr import ParsedFrr, parse_frr_conf
from policies.roce.render_frr import render_frr_conf
from policies.roce.render_sonic import render_config_db, render_config_db_json
from policies.roce.settings import check_roce_settings
from policies.roce.verify import verify_roce

__all__ = [
    "Link",
    "Nic",
    "ParsedConfigDb",
    "ParsedFrr",
    "RoceQos",
    "RoceSettings",
    "RoceSnapshot",
    "Switch",
    "SwitchPort",
    "SwitchRole",
    "VrfSegment",
    "check_roce_settings",
    "parse_config_db",
    "parse_frr_conf",
    "render_config_db",
    "render_config_db_json",
    "render_frr_conf",
    "render_roce_artifacts",
    "route_target",
    "verify_roce",
]
