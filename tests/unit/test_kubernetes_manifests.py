"""The Kubernetes manifests on paper (deployments/kubernetes/), loaded into the official
Kubernetes Python client's models so that a field Kubernetes does not know fails here rather
than on a cluster.

The client's own loading path (`ApiClient().deserialize`, the models' `from_dict`) drops an
unknown key without a word: a misspelled `serviceAcountName` loads, and the pod then runs under
the namespace's default service account. So `strict_model` loads a document that way, writes
the model back (`sanitize_for_serialization`) and fails on every path where the two differ
(a dropped key, a value the model changed); where the models are pydantic models (client 37+)
it also validates with them (extra fields forbidden, strict types).

The Prefect work-pool template (work-pool-base-job-template.json) is rendered the way
Prefect's worker renders it (the variables' defaults, `apply_values`) and its job manifest is
checked the same way, once the worker's own rewriting is applied (a string `args` split into
a list). One exception, named: prefect-kubernetes 0.8.0's worker refuses a job manifest without
`parallelism` and `completions` in the *pod* spec (its default template has them there),
fields V1PodSpec does not have and the API server drops.
"""

from __future__ import annotations

import copy
import json
import re
from pathlib import Path
from typing import Any

import kubernetes.client
import pytest
import yaml
from kubernetes.client import ApiClient

REPO = Path(__file__).resolve().parents[2]
K8S = REPO / "deployments" / "kubernetes"
JOB_FILE = K8S / "nightly-job.yaml"
TEMPLATE_FILE = K8S / "work-pool-base-job-template.json"
CONTAINERFILE = REPO / "deployments" / "image" / "Containerfile"

# prefect-kubernetes 0.8.0's worker demands these two in the pod spec (its job-manifest
# validator); V1PodSpec has no such fields, the API server drops them.
WORKER_POD_SPEC_KEYS = {"parallelism": 1, "completions": 1}
# KubernetesWorkerJobConfiguration's fields in prefect-kubernetes 0.8.0 (not a dependency:
# read there, mirrored here): BaseJobConfiguration's plus these.
KUBERNETES_WORKER_FIELDS = {
    "annotations",
    "namespace",
    "job_manifest",
    "cluster_config",
    "job_watch_timeout_seconds",
    "pod_watch_timeout_seconds",
    "stream_output",
}


# --- strict loading ----------------------------------------------------------------------


def _differences(given: Any, loaded: Any, path: str) -> list[str]:
    if isinstance(given, dict) and isinstance(loaded, dict):
        found = []
        for key in given:
            where = f"{path}.{key}" if path else key
            if key not in loaded:
                found.append(f"{where}: not a field of the model (the client dropped it)")
            else:
                found += _differences(given[key], loaded[key], where)
        found += [f"{path}.{key}: added by the model" for key in loaded if key not in given]
        return found
    if isinstance(given, list) and isinstance(loaded, list) and len(given) == len(loaded):
        return [
            d
            for i, (g, b) in enumerate(zip(given, loaded, strict=True))
            for d in _differences(g, b, f"{path}[{i}]")
        ]
    if given != loaded or type(given) is not type(loaded):
        return [f"{path}: {given!r} loaded as {loaded!r}"]
    return []


def strict_model(doc: dict, model_name: str) -> Any:
    """`doc` as the client's model `model_name`; AssertionError naming every path the model
    does not hold as given."""
    api = ApiClient()
    model = api.deserialize(json.dumps(doc), model_name, None)
    problems = _differences(doc, api.sanitize_for_serialization(model), "")
    assert not problems, f"{model_name}: " + "; ".join(problems)
    cls = getattr(kubernetes.client, model_name)
    if hasattr(cls, "model_validate"):  # pydantic models: extra fields forbidden, strict types
        cls.model_validate(doc)
    return model


def model_name(doc: dict) -> str:
    group_version = doc["apiVersion"]
    version = group_version.rpartition("/")[2]
    return f"{version.capitalize()}{doc['kind']}"


def job_documents(text: str | None = None) -> list[dict]:
    return [d for d in yaml.safe_load_all(text or JOB_FILE.read_text()) if d]


def the_job(docs: list[dict]) -> dict:
    (job,) = [d for d in docs if d["kind"] == "Job"]
    return job


# --- the Job file ------------------------------------------------------------------------


def test_every_document_of_the_job_file_loads_strictly():
    docs = job_documents()
    assert [d["kind"] for d in docs] == ["ServiceAccount", "PersistentVolumeClaim", "Job"]
    for doc in docs:
        strict_model(doc, model_name(doc))


@pytest.mark.parametrize(
    ("right", "wrong", "path", "silent"),
    [
        ("serviceAccountName:", "serviceAcountName:", "spec.template.spec.serviceAcountName", 1),
        ("expirationSeconds:", "expirationSecond:", "serviceAccountToken.expirationSecond", 1),
        ("readOnlyRootFilesystem:", "readOnlyRootFileSystem:", "readOnlyRootFileSystem", 1),
        ("activeDeadlineSeconds:", "activeDeadlineSecond:", "spec.activeDeadlineSecond", 1),
        # A required field misspelled: the client's loader refuses that one itself.
        ("mountPath: /artifacts", "mountpath: /artifacts", "mountPath", 0),
    ],
)
def test_a_misspelled_copy_of_the_job_fails(right, wrong, path, silent):
    text = JOB_FILE.read_text()
    assert text.count(right) == 1, right
    job = the_job(job_documents(text.replace(right, wrong)))
    if silent:
        # What the test guards against: the client's loader takes the misspelled copy.
        ApiClient().deserialize(json.dumps(job), "V1Job", None)
    with pytest.raises((AssertionError, ValueError), match=re.escape(path)):
        strict_model(job, "V1Job")


def test_a_value_of_the_wrong_type_fails():
    job = the_job(job_documents())
    job["spec"]["backoffLimit"] = "0"  # a string where Kubernetes wants an integer
    with pytest.raises((AssertionError, ValueError)):
        strict_model(job, "V1Job")


def _campaign_params(args: list[str]) -> Any:
    """The container's args as `agentsession campaign` resolves them (no flow started)."""
    from agentsession_core.cli import build_parser
    from flows.cli import resolve

    parsed = build_parser("campaign").parse_args(args)
    assert parsed.command == "campaign"
    return resolve(parsed)


def _mount_of(container: dict, volume: str) -> dict:
    (mount,) = [m for m in container["volumeMounts"] if m["name"] == volume]
    return mount


def _volume(pod: dict, name: str) -> dict:
    (volume,) = [v for v in pod["volumes"] if v["name"] == name]
    return volume


def test_the_job_runs_the_nightly_preset_with_the_projected_token_as_token_file():
    docs = job_documents()
    job = the_job(docs)
    pod = job["spec"]["template"]["spec"]
    (container,) = pod["containers"]
    params = _campaign_params(container["args"])
    assert params.name == "nightly"
    assert params.target.substrate.startswith("grpcs://")

    token = _volume(pod, "ate-token")["projected"]["sources"]
    (source,) = token
    projected = source["serviceAccountToken"]
    assert projected["audience"]
    assert projected["expirationSeconds"] >= 600  # Kubernetes' minimum
    mount = _mount_of(container, "ate-token")
    assert mount["readOnly"] is True
    assert params.target.token_file == f"{mount['mountPath']}/{projected['path']}"
    assert params.target.token is None and params.target.token_secret is None
    # Only the projected token: no API token of the service account in the pod.
    assert pod["automountServiceAccountToken"] is False
    (account,) = [d for d in docs if d["kind"] == "ServiceAccount"]
    assert pod["serviceAccountName"] == account["metadata"]["name"]

    assert str(params.out) == _mount_of(container, "artifacts")["mountPath"]
    (claim,) = [d for d in docs if d["kind"] == "PersistentVolumeClaim"]
    claim_name = _volume(pod, "artifacts")["persistentVolumeClaim"]["claimName"]
    assert claim_name == claim["metadata"]["name"]
    assert job["spec"]["backoffLimit"] == 0 and pod["restartPolicy"] == "Never"


def _image_user() -> tuple[int, dict[str, str]]:
    text = CONTAINERFILE.read_text()
    uid = int(re.search(r"^ARG UID=(\d+)$", text, re.M).group(1))
    env = dict(re.findall(r"\b(HOME|PREFECT_HOME)=(\S+)", text))
    return uid, env


def _check_pod_security(pod: dict, container: dict) -> None:
    uid, env = _image_user()
    security = pod["securityContext"]
    assert security["runAsNonRoot"] is True
    assert security["runAsUser"] == security["runAsGroup"] == security["fsGroup"] == uid
    assert security["seccompProfile"]["type"] == "RuntimeDefault"
    own = container["securityContext"]
    assert own["allowPrivilegeEscalation"] is False
    assert own["capabilities"]["drop"] == ["ALL"]
    assert own["readOnlyRootFilesystem"] is True
    # A read-only root: the user's home (PREFECT_HOME under it) and /tmp are volumes.
    mounted = {m["mountPath"] for m in container["volumeMounts"]}
    assert {env["HOME"], "/tmp"} <= mounted
    assert env["PREFECT_HOME"].startswith(env["HOME"] + "/")
    for kind in ("requests", "limits"):
        assert {"cpu", "memory"} <= set(container["resources"][kind]), kind


def test_the_job_runs_as_the_images_user_on_a_read_only_root_with_resources():
    pod = the_job(job_documents())["spec"]["template"]["spec"]
    (container,) = pod["containers"]
    _check_pod_security(pod, container)


# --- the Prefect work-pool template ----------------------------------------------------


@pytest.fixture(scope="module")
def template() -> dict:
    return json.loads(TEMPLATE_FILE.read_text())


def _placeholders(value: Any) -> set[str]:
    from prefect.utilities.templating import find_placeholders

    if isinstance(value, dict):
        return set().union(*(_placeholders(v) for v in value.values()))
    if isinstance(value, list):
        return set().union(*(_placeholders(v) for v in value))
    if isinstance(value, str):
        return {p.name for p in find_placeholders(value)}
    return set()


def test_every_placeholder_is_a_variable_and_every_variable_is_used(template):
    used = _placeholders(template["job_configuration"])
    declared = set(template["variables"]["properties"])
    # A placeholder without a variable stays a literal "{{ x }}"; a variable no placeholder
    # names has no effect (Prefect's documentation warns of both).
    assert used == declared, {"undeclared": used - declared, "unused": declared - used}
    assert not any(p.startswith("prefect.") for p in used)  # no block or variable lookups


def test_the_variables_are_a_json_schema_their_defaults_satisfy(template):
    import jsonschema

    schema = template["variables"]
    jsonschema.Draft202012Validator.check_schema(schema)
    defaults = {k: v["default"] for k, v in schema["properties"].items() if "default" in v}
    assert set(defaults) == set(schema["properties"]), "every variable has a default"
    jsonschema.validate(defaults, schema)


def _worker_configuration_model() -> type:
    """KubernetesWorkerJobConfiguration's fields (prefect-kubernetes 0.8.0) on Prefect's
    own BaseJobConfiguration, with unknown keys forbidden."""
    from prefect.workers.base import BaseJobConfiguration
    from pydantic import ConfigDict, Field

    class KubernetesJobConfiguration(BaseJobConfiguration):
        model_config = ConfigDict(extra="forbid")
        annotations: dict[str, str] = Field(default_factory=dict)
        namespace: str = "default"
        job_manifest: dict[str, Any]
        cluster_config: dict[str, Any] | None = None
        job_watch_timeout_seconds: int | None = None
        pod_watch_timeout_seconds: int = 60
        stream_output: bool = True

    fields = set(KubernetesJobConfiguration.model_fields)
    assert fields == set(BaseJobConfiguration.model_fields) | KUBERNETES_WORKER_FIELDS
    return KubernetesJobConfiguration


def rendered(template: dict, values: dict[str, Any] | None = None) -> Any:
    """The job configuration as the worker makes it from the template (its variables'
    defaults, then the deployment's values, through Prefect's apply_values)."""
    from prefect.utilities.templating import apply_values
    from prefect.workers.base import BaseJobConfiguration

    variables = BaseJobConfiguration._get_base_config_defaults(template["variables"]["properties"])
    variables.update(values or {})
    configuration = apply_values(copy.deepcopy(template["job_configuration"]), variables)
    return _worker_configuration_model()(**configuration)


SAMPLE = {
    "name": "nightly-owl",
    "command": "prefect flow-run execute",
    "labels": {"prefect.io/flow-run-name": "nightly-owl"},
    "env": {"PREFECT_API_URL": "http://prefect-server.prefect:4200/api"},
}


def as_submitted(manifest: dict) -> dict:
    """The worker's own rewriting before it submits the Job: a string `args` is split
    (prefect's command_from_string); then the pod-spec keys prefect-kubernetes demands, which
    the API server drops, are taken out here after checking they are what it demands."""
    from prefect.utilities.processutils import command_from_string

    manifest = copy.deepcopy(manifest)
    pod = manifest["spec"]["template"]["spec"]
    container = pod["containers"][0]
    if isinstance(container.get("args"), str):
        container["args"] = command_from_string(container["args"])
    for key, value in WORKER_POD_SPEC_KEYS.items():
        assert pod.pop(key) == value, key
    return manifest


def test_the_rendered_job_manifest_is_a_strict_v1_job(template):
    configuration = rendered(template, SAMPLE)
    manifest = configuration.job_manifest
    assert manifest["metadata"]["generateName"] == "nightly-owl-"
    # What prefect-kubernetes' validator requires of every job manifest.
    pod = manifest["spec"]["template"]["spec"]
    assert pod["restartPolicy"] == "Never"
    assert pod["containers"][0]["name"] == "prefect-job"
    job = strict_model(as_submitted(manifest), "V1Job")
    assert job.spec.template.spec.containers[0].args == ["prefect", "flow-run", "execute"]
    # The image's entrypoint is agentsession: the worker's command runs through env.
    assert job.spec.template.spec.containers[0].command == ["/usr/bin/env"]


def test_the_template_with_its_defaults_only_renders_too(template):
    configuration = rendered(template, {"command": "prefect flow-run execute"})
    strict_model(as_submitted(configuration.job_manifest), "V1Job")


def test_the_template_pod_matches_the_job_files_security_and_token(template):
    manifest = as_submitted(rendered(template, SAMPLE).job_manifest)
    pod = manifest["spec"]["template"]["spec"]
    (container,) = pod["containers"]
    _check_pod_security(pod, container)
    job_pod = the_job(job_documents())["spec"]["template"]["spec"]
    (job_container,) = job_pod["containers"]
    for name in ("ate-token", "artifacts"):
        assert _mount_of(container, name) == _mount_of(job_container, name)
    token = _volume(pod, "ate-token")["projected"]["sources"][0]["serviceAccountToken"]
    assert token["path"] == "token" and token["expirationSeconds"] >= 600
    assert pod["automountServiceAccountToken"] is False


def test_a_misspelled_copy_of_the_template_fails(template):
    text = TEMPLATE_FILE.read_text()
    assert text.count('"serviceAccountName"') == 1
    wrong = json.loads(text.replace('"serviceAccountName"', '"serviceAcountName"'))
    with pytest.raises(AssertionError, match="serviceAcountName"):
        strict_model(as_submitted(rendered(wrong, SAMPLE).job_manifest), "V1Job")


def test_a_misspelled_job_configuration_key_fails(template):
    from pydantic import ValidationError

    wrong = copy.deepcopy(template)
    wrong["job_configuration"]["pod_watch_timeout_second"] = wrong["job_configuration"].pop(
        "pod_watch_timeout_seconds"
    )
    with pytest.raises(ValidationError, match="pod_watch_timeout_second"):
        rendered(wrong, SAMPLE)


def test_a_placeholder_without_a_variable_fails(template):
    wrong = copy.deepcopy(template)
    wrong["variables"]["properties"]["image_name"] = wrong["variables"]["properties"].pop("image")
    with pytest.raises(AssertionError, match="undeclared"):
        test_every_placeholder_is_a_variable_and_every_variable_is_used(wrong)
