"""Bad operational settings stop `serve` at once with one line naming them (issue 14).

A scheduled job's interval is 0 (off) to a week: a longer one (milliseconds typed for
seconds) would silently mean "never". A value that is no whole number names its variable.
An unknown ISOFABRIC_METRICS_ACCESS or --log-format is a usage error (exit 2), not a crash
at the first scrape.
"""

from __future__ import annotations

import logging
from collections.abc import Iterator

import pytest
from typer.testing import CliRunner

from cli import app
from tenancy.store.settings import MAX_JOB_INTERVAL_SECONDS, load_settings

INTERVALS = ["ISOFABRIC_FULL_VERIFY_INTERVAL_SECONDS", "ISOFABRIC_CHECKPOINT_INTERVAL_SECONDS"]
runner = CliRunner()


@pytest.mark.parametrize("name", INTERVALS)
@pytest.mark.parametrize("value", ["-1", str(MAX_JOB_INTERVAL_SECONDS + 1), "9" * 30])
def test_an_interval_out_of_range_names_the_variable_and_the_range(monkeypatch, name, value):
    monkeypatch.setenv(name, value)

    with pytest.raises(ValueError, match=rf"^{name} must be .* from 0 \(off\) to 604800"):
        load_settings()


@pytest.mark.parametrize("name", INTERVALS)
@pytest.mark.parametrize("value", ["0", "1", str(MAX_JOB_INTERVAL_SECONDS)])
def test_an_interval_in_range_is_taken(monkeypatch, name, value):
    monkeypatch.setenv(name, value)

    settings = load_settings()

    assert getattr(settings, name.removeprefix("ISOFABRIC_").lower()) == int(value)


@pytest.mark.parametrize("value", ["abc", "1.5", "1e9", "5m"])
def test_a_value_that_is_no_whole_number_names_its_variable(monkeypatch, value):
    monkeypatch.setenv("ISOFABRIC_CHECKPOINT_INTERVAL_SECONDS", value)

    with pytest.raises(ValueError, match=r"^ISOFABRIC_CHECKPOINT_INTERVAL_SECONDS must be a whole"):
        load_settings()


@pytest.mark.parametrize(("value", "processes"), [(None, 2), ("0", 0), ("3", 3)])
def test_heavy_requests_run_in_two_worker_processes_unless_told_otherwise(
    monkeypatch, value, processes
):
    monkeypatch.delenv("ISOFABRIC_HEAVY_PROCESSES", raising=False)
    if value is not None:
        monkeypatch.setenv("ISOFABRIC_HEAVY_PROCESSES", value)

    assert load_settings().heavy_processes == processes


def test_a_negative_number_of_heavy_processes_names_its_variable(monkeypatch):
    monkeypatch.setenv("ISOFABRIC_HEAVY_PROCESSES", "-1")

    with pytest.raises(ValueError, match=r"^ISOFABRIC_HEAVY_PROCESSES must be .* at least 0"):
        load_settings()


@pytest.fixture
def root_logger_kept() -> Iterator[None]:
    """`serve` gives the root logger a handler on (CliRunner's) stderr: put the old ones back."""
    root = logging.getLogger()
    handlers, level = root.handlers[:], root.level
    yield
    root.handlers[:] = handlers
    root.setLevel(level)


@pytest.mark.usefixtures("root_logger_kept")
@pytest.mark.parametrize(
    ("env", "args", "named"),
    [
        ({"ISOFABRIC_METRICS_ACCESS": "public"}, [], "ISOFABRIC_METRICS_ACCESS"),
        ({"ISOFABRIC_CHECKPOINT_INTERVAL_SECONDS": "1e9"}, [], "CHECKPOINT_INTERVAL"),
        ({}, ["--log-format", "xml"], "--log-format"),
        ({"ISOFABRIC_FORWARDED_ALLOW_IPS": "proxy.example"}, [], "FORWARDED_ALLOW_IPS"),
        ({}, ["--forwarded-allow-ips", "10.0.0.0/8,nope"], "--forwarded-allow-ips"),
    ],
)
def test_serve_refuses_a_bad_setting_with_exit_2(tmp_path, env, args, named):
    env = {"ISOFABRIC_DATABASE_URL": f"sqlite:///{tmp_path / 'never.db'}", **env}

    result = runner.invoke(app, ["serve", "--port", "0", *args], env=env)

    assert result.exit_code == 2, result.output
    assert named in result.stderr and "Traceback" not in result.output
    assert not (tmp_path / "never.db").exists()


def test_trusted_proxies_are_addresses_networks_or_any(monkeypatch):
    monkeypatch.setenv("ISOFABRIC_FORWARDED_ALLOW_IPS", " 10.0.0.1, 192.168.0.0/16 ,::1,*")

    assert load_settings().forwarded_allow_ips == ("10.0.0.1", "192.168.0.0/16", "::1", "*")
