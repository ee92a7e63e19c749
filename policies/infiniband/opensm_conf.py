"""OpenSM's options file and command line as OpenSM reads them: what SIGHUP reloads, what not.

The deploy agent (agent/) compares the opensm.conf it installs with the one the running
OpenSM was started with: an option outside OpenSM's ``can_update`` set applies only at a restart
(`restart_only_options`, `restart_option_changes`). It checks from OpenSM's command line that the
files it installs are the ones OpenSM reads (`opensm_file_paths`), reads the M_Key its queries
need (`management_keys`) and spots rejected configuration in the log (`configuration_errors`).

Pure (stdlib only, no I/O). Read in linux-rdma/opensm: ``opensm/osm_subnet.c`` (``opt_tbl[]``,
``osm_subn_parse_conf_file()``, ``osm_subn_rescan_conf_files()``, ``clean_val()``),
``opensm/main.c`` (``long_option[]``) and ``include/opensm/osm_base.h`` (default paths).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

__all__ = [
    "CONFIG_ERROR_PATTERNS",
    "HUP_RELOADABLE_OPTIONS",
    "OptionChange",
    "configuration_errors",
    "management_keys",
    "opensm_file_paths",
    "opensm_options",
    "restart_only_options",
    "restart_option_changes",
]

_QOS_ITEMS = ("max_vls", "high_limit", "vlarb_high", "vlarb_low", "sl2vl")
_CC_SWITCH_ITEMS = (
    *("control_map", "victim_mask", "credit_mask", "threshold", "packet_size"),
    *("credit_starvation_threshold", "credit_starvation_return_delay", "marking_rate"),
)
_CC_CA_ITEMS = (
    *("port_control", "control_map", "ccti_timer", "ccti_increase", "trigger_threshold"),
    "ccti_min",
)
# OpenSM opt_tbl[] in opensm/osm_subnet.c (linux-rdma/opensm fa74b98c, as in 3.3.23): the options
# whose can_update column is 1. osm_subn_rescan_conf_files() (every heavy sweep, so every SIGHUP)
# re-applies only these; every other option keeps the value OpenSM was started with.
HUP_RELOADABLE_OPTIONS = frozenset(
    {
        *("m_key", "sm_key", "sa_key", "m_key_lease_period", "m_key_protection_level"),
        *("m_key_lookup", "sweep_interval", "max_wire_smps", "max_wire_smps2"),
        *("max_smps_timeout", "max_msg_fifo_timeout", "sm_priority", "max_op_vls"),
        *("force_link_speed", "force_link_speed_ext", "force_link_width", "fdr10"),
        *("reassign_lids", "ignore_other_sm", "disable_multicast", "subnet_timeout"),
        *("packet_life_time", "vl_stall_count", "leaf_vl_stall_count", "head_of_queue_lifetime"),
        *("leaf_head_of_queue_lifetime", "local_phy_errors_threshold", "overrun_errors_threshold"),
        *("use_mfttop", "sminfo_polling_timeout", "polling_retry_number", "force_heavy_sweep"),
        *("port_profile_switch_nodes", "sweep_on_trap", "connect_roots", "log_max_size"),
        *("log_flags", "force_log_flush", "accum_log_file", "no_partition_enforcement"),
        *("part_enforce", "keep_pkey_indexes", "sm_assigned_guid", "qos"),
        *("suppress_sl2vl_mad_status_errors", "port_shifting", "scatter_ports", "sa_db_dump"),
        *("torus_config", "do_mesh_analysis", "exit_on_fatal", "honor_guid2lid_file"),
        *("sm_inactive", "babbling_port_policy", "drop_event_subscriptions"),
        *("ipoib_mcgroup_creation_validation", "mcgroup_join_validation"),
        *("use_original_extended_sa_rates_only", "max_rate_enum", "use_optimized_slvl"),
        *("fsync_high_avail_files", "congestion_control", "enable_quirks", "no_clients_rereg"),
        *("consolidate_ipv6_snm_req", "lash_start_vl", "sm_sl", "nue_max_num_vls"),
        *("log_prefix", "quasi_ftree_indexing", "cc_cct"),
        *(
            f"qos{kind}_{item}"
            for kind in ("", "_ca", "_sw0", "_swe", "_rtr")
            for item in _QOS_ITEMS
        ),
        *(f"cc_sw_cong_setting_{item}" for item in _CC_SWITCH_ITEMS),
        *(f"cc_ca_cong_setting_{item}" for item in _CC_CA_ITEMS),
    }
)

# Restart-only booleans: opts_parse_boolean() reads exactly "TRUE" as true and anything else as
# false, and osm_subn_set_default_opt() starts each of these at FALSE, so an absent line, "FALSE"
# and "false" are the same setting.
_FALSE_BY_DEFAULT = frozenset(
    {
        *("allow_both_pkeys", "daemon", "lmc_esp0", "single_thread", "use_ucast_cache"),
        *("avoid_throttled_links", "guid_routing_order_no_scatter", "nue_include_switches"),
    }
)


@dataclass(frozen=True, slots=True)
class OptionChange:
    """A restart-only option whose value differs; None means the line is absent."""

    name: str
    before: str | None
    after: str | None

    def __str__(self) -> str:
        return f"{self.name}: {self.before or '(unset)'} -> {self.after or '(unset)'}"


def opensm_options(text: str) -> dict[str, str]:
    """The options of an opensm.conf as OpenSM reads them (osm_subn_parse_conf_file()).

    ``#`` starts a comment anywhere on a line; the option name is the first token (space, tab);
    the value is the rest of the line with surrounding white space and one pair of matching
    quotes removed (clean_val()); the last line of an option wins.
    """
    options: dict[str, str] = {}
    for line in text.splitlines():
        name, _, value = line.split("#", 1)[0].strip(" \t\n").partition(" ")
        if "\t" in name:
            name, _, rest = name.partition("\t")
            value = f"{rest} {value}"
        if name:
            options[name] = _clean_value(value)
    return options


def _clean_value(value: str) -> str:
    value = value.strip()
    if len(value) >= 2 and value[0] == value[-1] and value[0] in "\"'":
        return value[1:-1]
    return value


def restart_only_options(text: str) -> dict[str, str]:
    """The options of `text` that only a restart applies, normalised for comparison.

    Every option not in `HUP_RELOADABLE_OPTIONS` (an unknown name too: assume the worst). The
    restart-only booleans that default to FALSE are always present, as "TRUE" or "FALSE".
    """
    options = {k: v for k, v in opensm_options(text).items() if k not in HUP_RELOADABLE_OPTIONS}
    for name in _FALSE_BY_DEFAULT:
        options[name] = "TRUE" if options.get(name) == "TRUE" else "FALSE"
    return options


def restart_option_changes(
    started_with: Mapping[str, str], new: Mapping[str, str]
) -> tuple[OptionChange, ...]:
    """The restart-only options (`restart_only_options` form) whose values differ, by name."""
    names = sorted(started_with.keys() | new.keys())
    return tuple(
        OptionChange(name, started_with.get(name), new.get(name))
        for name in names
        if started_with.get(name) != new.get(name)
    )


def management_keys(text: str) -> tuple[int | None, int | None]:
    """(M_Key, SA_Key) of an opensm.conf; None when absent or unreadable, M_Key 0 is None.

    OpenSM reads both with strtoull(.., 0); an M_Key of 0 disables protection.
    """
    options = opensm_options(text)
    m_key, sa_key = (_number(options.get(name)) for name in ("m_key", "sa_key"))
    return (m_key or None), sa_key


def _number(text: str | None) -> int | None:
    try:
        return int(text, 0) if text else None
    except ValueError:
        return None


# ------------------------------------------------------------------------- the running OpenSM

# OpenSM's build default (include/opensm/osm_base.h: OSM_DEFAULT_CONFIG_FILE and the partition
# and QoS policy defaults are OPENSM_CONFIG_DIR "/<name>"; Debian builds with /etc/opensm).
OPENSM_CONFIG_DIR = "/etc/opensm"
# opensm/main.c long_option[]: --config (-F), --Pconfig (-P), --qos_policy_file (-Y), --qos (-Q).
_PATH_OPTIONS = {
    "opensm.conf": ("F", "config"),
    "partitions.conf": ("P", "Pconfig"),
    "qos-policy.conf": ("Y", "qos_policy_file"),
}
_FILE_OPTION = {"partitions.conf": "partition_config_file", "qos-policy.conf": "qos_policy_file"}
# OpenSM log lines that mean the files were (partly) rejected. The SM logs "SUBNET UP" anyway.
CONFIG_ERROR_PATTERNS = (
    "Partition configuration in error",
    "PARSE ERROR",
    "ERR 0510",  # osm_prtn_make_partitions() failed (osm_pkey_mgr.c)
    "ERR 0512",  # P_Key table full: key not installed
    "ERR 0507",  # switch enforcement table full: enforcement turned off
    "ERR 331A",  # opensm.conf could not be re-read at the heavy sweep (osm_state_mgr.c)
    "ERR AC",  # QoS policy errors: AC03/AC05 drop the policy, AC14 = rule for a missing pkey
)


def opensm_file_paths(
    argv: Sequence[str], file_options: Mapping[str, str]
) -> dict[str, str | None]:
    """The files an OpenSM started with `argv` reads, by conf-dir name.

    `argv` is OpenSM's command line (``/proc/<pid>/cmdline``), parsed as getopt_long_only() does
    for the options that name files: ``-F path``, ``-Fpath``, ``--config path``,
    ``-config=path``, and likewise ``-P``/``--Pconfig`` and ``-Y``/``--qos_policy_file`` (the
    last occurrence wins; abbreviated long names are not recognised). `file_options` are the
    options of the opensm.conf it was started with: the command line overrides them, and the
    build defaults under `OPENSM_CONFIG_DIR` apply when neither names a file.

    Returns:
        ``{"opensm.conf": path, "partitions.conf": path, "qos-policy.conf": path or None}``;
        the QoS policy is None when QoS is off (neither ``-Q``/``--qos`` nor ``qos TRUE``).
        Relative paths are returned as given (relative to OpenSM's working directory).
    """
    given = _command_line_values(argv)
    paths: dict[str, str | None] = {}
    for name in _PATH_OPTIONS:
        default = file_options.get(_FILE_OPTION.get(name, ""), f"{OPENSM_CONFIG_DIR}/{name}")
        paths[name] = given.get(name) or default
    if "Q" not in given and file_options.get("qos") != "TRUE":
        paths["qos-policy.conf"] = None
    return paths


def _command_line_values(argv: Sequence[str]) -> dict[str, str]:
    """Conf-dir name -> path given on the command line; ``"Q"`` when QoS is switched on."""
    by_flag = {flag: name for name, flags in _PATH_OPTIONS.items() for flag in flags}
    values: dict[str, str] = {}
    args = list(argv[1:])
    for index, arg in enumerate(args):
        flag, value = _split_option(arg)
        if flag in ("Q", "qos"):
            values["Q"] = "on"
        elif flag in by_flag:
            following = args[index + 1] if index + 1 < len(args) else ""
            values[by_flag[flag]] = value if value is not None else following
    return values


def _split_option(arg: str) -> tuple[str | None, str | None]:
    """(option name, attached value) of one argument, or (None, None) for a non-option."""
    if arg.startswith("--") or (arg.startswith("-") and len(arg) > 2):
        name, equals, value = arg.lstrip("-").partition("=")
        long_names = {flag for flags in _PATH_OPTIONS.values() for flag in flags[1:]} | {"qos"}
        if name in long_names:
            return name, value if equals else None
        if arg.startswith("--"):
            return None, None
        return arg[1], arg[2:]  # "-Fpath": a short option with its value attached
    if arg.startswith("-") and len(arg) == 2:
        return arg[1], None
    return None, None


def configuration_errors(log_text: str) -> list[str]:
    """The OpenSM log lines of `log_text` that report a rejected configuration."""
    return [line for line in log_text.splitlines() if any(p in line for p in CONFIG_ERROR_PATTERNS)]
