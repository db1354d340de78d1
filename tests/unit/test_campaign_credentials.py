"""The campaign's bearer token is never a flow parameter (issue #11): where the flow takes it
from (flows/credentials.py), how `agentsession campaign` hands it over, and the
`target.token_secret` parameter. The Secret block itself is loaded from a real Prefect API in
tests/integration/test_flow_credentials.py."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from agentsession_core.campaign.params import CampaignParams
from agentsession_core.campaign.standalone import run_campaign
from agentsession_core.cli import main
from agentsession_core.engine.params import parse
from agentsession_core.engine.shards.split import plan_shards
from agentsession_core.errors import UsageError
from flows.credentials import (
    TOKEN_ENV,
    TOKEN_PARAMETER_REFUSED,
    token_in_environment,
    with_token,
    without_token,
)

ATE = {"substrate": "grpc://127.0.0.1:1", "router": "http://127.0.0.1:2"}


def campaign(**target) -> CampaignParams:
    return parse(CampaignParams, {"script": "smoke", "target": target})


def test_token_secret_is_a_block_name_and_the_only_credential() -> None:
    assert campaign(token_secret="substrate-token").target.token_secret == "substrate-token"
    assert campaign(token_secret="").target.token_secret is None
    for target, named in (
        ({"token": "t", "token_secret": "s"}, "give one of token, token_file and token_secret"),
        (
            {**ATE, "token_file": "/run/t", "token_secret": "s"},
            "give one of token, token_file and token_secret",
        ),
        ({"token_secret": "Not_A_Block"}, "not a Prefect block name"),
    ):
        with pytest.raises(UsageError) as refused:
            campaign(**target)
        assert "target.token_secret" in str(refused.value) and named in str(refused.value)


def test_the_cli_hands_a_token_over_outside_the_parameters() -> None:
    params = campaign(token="s3cr3t", local_workers=3)
    stripped, token = without_token(params)
    assert token == "s3cr3t" and stripped.target.token is None
    assert stripped.target.local_workers == 3 and params.target.token == "s3cr3t"
    assert without_token(stripped) == (stripped, None)


def test_the_environment_holds_the_token_only_while_the_flow_runs(monkeypatch) -> None:
    monkeypatch.setenv(TOKEN_ENV, "the-callers")
    with token_in_environment("from-file"):
        assert os.environ[TOKEN_ENV] == "from-file"
    assert os.environ[TOKEN_ENV] == "the-callers"
    monkeypatch.delenv(TOKEN_ENV)
    with token_in_environment("from-file"):
        pass
    assert TOKEN_ENV not in os.environ
    with token_in_environment(None):
        assert TOKEN_ENV not in os.environ


async def test_the_flow_refuses_a_token_parameter_and_reads_the_environment(monkeypatch) -> None:
    with pytest.raises(UsageError) as refused:
        await with_token(campaign(token="s3cr3t"))
    assert str(refused.value) == TOKEN_PARAMETER_REFUSED
    assert "s3cr3t" not in str(refused.value)
    assert all(w in TOKEN_PARAMETER_REFUSED for w in ("target.token_secret", TOKEN_ENV))

    monkeypatch.delenv(TOKEN_ENV, raising=False)
    bare = campaign()
    assert (await with_token(bare)).target.token is None
    monkeypatch.setenv(TOKEN_ENV, " from-env\n")
    resolved = await with_token(bare)
    assert resolved.target.token == "from-env" and bare.target.token is None
    # A parameter that names a credential wins over the environment.
    with_file = campaign(**ATE, token_file="/run/t")
    assert (await with_token(with_file)).target.token is None


async def test_without_prefect_a_token_secret_is_refused_before_anything_starts(tmp_path) -> None:
    params = parse(
        CampaignParams,
        {"script": "smoke", "out": str(tmp_path), "target": {"token_secret": "substrate-token"}},
    )
    with pytest.raises(UsageError, match="read by the campaign flow only"):
        await run_campaign(params, handle_signals=False)
    assert list(tmp_path.iterdir()) == []


def test_shards_of_a_campaign_get_the_engines_target() -> None:
    params = campaign(token_secret="substrate-token")
    resolved = params.model_copy(
        update={"target": params.target.model_copy(update={"token": "from-block"})}
    )
    plans = plan_shards(resolved, 2, target=ATE)
    assert [p.params.target.token for p in plans] == ["from-block", "from-block"]
    assert not hasattr(plans[0].params.target, "token_secret")


def test_campaign_refuses_a_token_on_its_command_line(tmp_path, capsys) -> None:
    code = main(["campaign", "--preset", "demo", "--set", "target.token=s3cr3t"])
    err = capsys.readouterr().err
    assert code == 2 and "process list" in err and "target.token_secret" in err, err
    assert len(err.strip().splitlines()) == 1 and "s3cr3t" not in err


def test_campaign_print_params_redacts_a_file_token(tmp_path: Path, capsys) -> None:
    params = tmp_path / "campaign.yaml"
    params.write_text("name: mine\ntarget:\n  token: s3cr3t\n")
    # A --set that leaves the file's token alone is no token on the command line.
    assert main(["campaign", "--params", str(params), "--set", "seed=5", "--print-params"]) == 0
    out = capsys.readouterr().out
    assert json.loads(out)["target"]["token"] == "***" and "s3cr3t" not in out


def test_the_flow_form_offers_the_secret_block_and_warns_off_the_token() -> None:
    from prefect.utilities.callables import parameter_schema

    from flows.campaign import campaign as flow

    schema = parameter_schema(flow.fn).model_dump_for_openapi()
    definitions = schema.get("definitions") or schema.get("$defs")
    target = definitions["CampaignTargetParams"]["properties"]
    assert "Prefect Secret block" in target["token_secret"]["description"]
    assert "refuses" in target["token"]["description"]
