"""``gamut push``: upload a built dataset folder to the Hugging Face hub with huggingface_hub.

The folder is uploaded as it is (card plus parquet shards), so the hub repository is the
same layout that ``load_dataset`` already reads locally.
"""

from __future__ import annotations

from pathlib import Path

from huggingface_hub import HfApi
from huggingface_hub.errors import HfHubHTTPError, OfflineModeIsEnabled

from gamut_hf.features import VARIANTS
from gamut_hf.files import InputError

UPLOAD_PATTERNS = ["README.md", *(f"{variant}/*.parquet" for variant in VARIANTS)]


class PushError(RuntimeError):
    """The hub refused or could not be reached; the message is one line."""


def check_built_folder(folder: Path) -> list[Path]:
    """The files a push would upload, after checking the folder is a complete build."""
    if not (folder / "README.md").is_file():
        raise InputError(f"{folder}: no README.md; is this a folder made by `gamut build`?")
    files = [folder / "README.md"]
    for variant in VARIANTS:
        shards = sorted((folder / variant).glob("*.parquet"))
        if not shards:
            raise InputError(f"{folder}: no {variant}/*.parquet; is this a folder made by `gamut build`?")
        files += shards
    return files


def push_dataset(folder: str | Path, repo_id: str, *, private: bool = False, token: str | None = None,
                 revision: str | None = None, api: HfApi | None = None) -> str:
    """Create (if needed) the dataset repository and upload the folder; returns the commit URL."""
    folder = Path(folder)
    files = check_built_folder(folder)
    api = api or HfApi(token=token)
    try:
        api.create_repo(repo_id, repo_type="dataset", private=private, exist_ok=True)
        commit = api.upload_folder(
            folder_path=folder, repo_id=repo_id, repo_type="dataset", revision=revision,
            allow_patterns=UPLOAD_PATTERNS, delete_patterns=[f"{variant}/*.parquet" for variant in VARIANTS],
            commit_message=f"Upload GAMUT dataset ({len(files) - 1} parquet files)",
        )
    except OfflineModeIsEnabled:
        raise PushError("cannot push while HF_HUB_OFFLINE is set") from None
    except HfHubHTTPError as error:
        raise PushError(f"the hub refused the push to {repo_id}: {str(error).splitlines()[0]}") from None
    except (OSError, ConnectionError) as error:  # requests/httpx connection failures are OSErrors
        raise PushError(f"cannot reach the hub to push {repo_id}: {type(error).__name__}: {error}") from None
    return str(getattr(commit, "commit_url", commit))
