"""Which client a base URL needs: OpenAI's, or the openai package's Azure client.

Azure OpenAI serves a model two ways:

- its v1 endpoint, ``https://R.openai.azure.com/openai/v1/``: OpenAI's own protocol, the
  plain client with ``--base-url`` (the model is ``--model``);
- a deployment endpoint, ``https://R.openai.azure.com/openai/deployments/D/chat/completions
  ?api-version=V``: the deployment ``D`` in the path, the version in the query and the key
  in an ``api-key`` header. ``AzureOpenAI`` builds those; icplay hands it the endpoint, the
  deployment and the version read from such a URL (pasted whole, with or without
  ``/chat/completions``), or from ``--azure-deployment`` / ``--api-version`` beside a
  ``--base-url`` that names the resource (``azure_url`` writes that URL).
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from urllib.parse import parse_qs, quote, urlsplit

_DEPLOYMENT_PATH = re.compile(r"^(?P<prefix>.*?)/openai/deployments/(?P<deployment>[^/]+)(/chat/completions)?/?$")


@dataclass(frozen=True)
class AzureDeployment:
    endpoint: str          # https://R.openai.azure.com (with any path before /openai)
    deployment: str
    api_version: str


def azure_deployment(url: str | None) -> AzureDeployment | None:
    """The Azure deployment a base URL names, or None for any other URL. A deployment URL
    without ``api-version`` is a ValueError saying what to add."""
    if not url:
        return None
    parts = urlsplit(url)
    found = _DEPLOYMENT_PATH.match(parts.path)
    if found is None:
        return None
    version = (parse_qs(parts.query).get("api-version") or [""])[0]
    if not version:
        raise ValueError(f"the Azure deployment URL {url} has no api-version: add ?api-version=... "
                         "(or pass --api-version)")
    endpoint = f"{parts.scheme}://{parts.netloc}{found.group('prefix')}"
    return AzureDeployment(endpoint, found.group("deployment"), version)


def azure_url(base_url: str | None, deployment: str | None, api_version: str | None) -> str | None:
    """``--base-url`` with ``--azure-deployment`` / ``--api-version`` folded in: the deployment
    URL that ``azure_deployment`` reads back (the base URL as it was when neither is given)."""
    if not deployment and not api_version:
        return base_url
    if not base_url:
        raise ValueError("--azure-deployment and --api-version need --base-url https://RESOURCE.openai.azure.com")
    parts = urlsplit(base_url)
    version = api_version or (parse_qs(parts.query).get("api-version") or [""])[0]
    if not version:
        raise ValueError("--azure-deployment needs --api-version (e.g. 2024-10-21)")
    prefix, deployment = _resource_path(parts.path, deployment)
    return f"{parts.scheme}://{parts.netloc}{prefix}/openai/deployments/{quote(deployment, safe='')}" \
           f"?api-version={quote(version, safe='')}"


def _resource_path(path: str, deployment: str | None) -> tuple[str, str]:
    """(the path before /openai, the deployment) of a base URL's path and the flag."""
    found = _DEPLOYMENT_PATH.match(path)
    if found is not None:
        return found.group("prefix"), deployment or found.group("deployment")
    if not deployment:
        raise ValueError("--api-version needs --azure-deployment (or a deployment URL as --base-url)")
    prefix = path.rstrip("/")
    return (prefix[:-len("/openai")] if prefix.endswith("/openai") else prefix), deployment


def make_client(base_url: str | None, api_key: str, timeout: float):
    """The openai client for ``base_url`` (retries off: icplay counts its own)."""
    import openai

    azure = azure_deployment(base_url)
    if azure is not None:
        return openai.AzureOpenAI(azure_endpoint=azure.endpoint, azure_deployment=azure.deployment,
                                  api_version=azure.api_version, api_key=api_key, timeout=timeout, max_retries=0)
    return openai.OpenAI(api_key=api_key, base_url=base_url, timeout=timeout, max_retries=0)


__all__ = ["AzureDeployment", "azure_deployment", "azure_url", "make_client"]
