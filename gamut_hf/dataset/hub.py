"""``gamut push``: upload a built dataset folder to the Hugging Face hub with huggingface_hub.

The folder is uploaded as it is (card plus parquet shards), so the hub repository is the
same layout that ``load_dataset`` already reads locally; only the card's examples are given the
hub id where the build left a placeholder.
"""

from __future__ import annotations

import threading
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Literal

from huggingface_hub import CommitOperationAdd, CommitOperationDelete, HfApi
from huggingface_hub.errors import HfHubHTTPError, OfflineModeIsEnabled

from gamut_hf.atomic import write_bytes
from gamut_hf.core.names import VARIANTS
from gamut_hf.errors import GamutError
from gamut_hf.files import InputError


class PushError(GamutError, RuntimeError):
    """The hub refused or could not be reached; the message is one line."""


class PushConflict(PushError):
    """An exclusive push found the repository moved on since the last pull (another commit won)."""


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


def push_dataset(
    folder: str | Path,
    repo_id: str,
    *,
    private: bool = False,
    token: str | None = None,
    revision: str | None = None,
    api: HfApi | None = None,
) -> str:
    """Create (if needed) the dataset repository and upload the folder in one commit, the card's
    examples naming ``repo_id`` (the folder itself is left as it is); shards the hub holds that the
    build does not are deleted in the same commit. Returns the commit URL."""
    from gamut_hf.dataset.card import card_for_repo

    folder = Path(folder)
    files = check_built_folder(folder)
    card = card_for_repo((folder / "README.md").read_text(encoding="utf-8"), repo_id)
    shards = [path.relative_to(folder).as_posix() for path in files if path.name != "README.md"]
    api = api or HfApi(token=token)
    with hub_errors(repo_id, "push"):
        api.create_repo(repo_id, repo_type="dataset", private=private, exist_ok=True)
        held = api.list_repo_files(repo_id, repo_type="dataset", revision=revision)
        stale = [name for name in held if _is_shard(name) and name not in shards]
        commit = api.create_commit(
            repo_id=repo_id,
            repo_type="dataset",
            revision=revision,
            operations=[
                CommitOperationAdd(path_in_repo="README.md", path_or_fileobj=card.encode("utf-8")),
                *(CommitOperationAdd(path_in_repo=name, path_or_fileobj=folder / name) for name in shards),
                *(CommitOperationDelete(path_in_repo=name) for name in stale),
            ],
            commit_message=f"Upload GAMUT dataset ({len(shards)} parquet files)",
        )
    return str(getattr(commit, "commit_url", commit))


def _is_shard(name: str) -> bool:
    variant, _, file = name.partition("/")
    return variant in VARIANTS and "/" not in file and file.endswith(".parquet")


@contextmanager
def hub_errors(repo_id: str, action: Literal["push", "read"]) -> Iterator[None]:
    """The hub's failures as one-line PushErrors naming the repository and what was being done."""
    try:
        yield
    except OfflineModeIsEnabled:
        raise PushError(f"cannot {action} while HF_HUB_OFFLINE is set") from None
    except HfHubHTTPError as error:
        refused = f"the hub refused the push to {repo_id}" if action == "push" else f"cannot read {repo_id}"
        raise PushError(f"{refused}: {str(error).splitlines()[0]}") from None
    except (OSError, ConnectionError) as error:  # requests/httpx connection failures are OSErrors
        raise PushError(f"cannot reach the hub to {action} {repo_id}: {type(error).__name__}: {error}") from None


class HubFolder:
    """A hub dataset repository mirrored in a local folder: the Space's results and requests.

    ``pull`` brings the folder up to date with the repository (and remembers the commit it
    read); ``push`` commits the given local files (paths relative to the folder keep their
    place). The leaderboard template keeps its queue and results this way, so the Space, the
    worker and the hub agree on one layout.

    A push that fails is not lost: its files are remembered, kept over later pulls (the local
    change is the newer one) and sent again with the next push. An ``exclusive`` push is
    committed only on top of the commit last pulled; if anyone committed since, the hub refuses
    it (:class:`PushConflict`), which is how two workers' claims on one request are told apart;
    a failed exclusive push is not remembered (what it said may no longer hold).
    """

    def __init__(self, repo_id: str, local: str | Path, *, token: str | None = None, api: HfApi | None = None):
        self.repo_id = repo_id
        self.local = Path(local)
        self.api = api or HfApi(token=token)
        self.revision: str | None = None  # the commit the local folder was last pulled at
        self.unpushed: set[Path] = set()
        self._lock = threading.Lock()  # a worker's heartbeat thread pushes beside its main thread

    def pull(self) -> Path:
        with self._lock:
            kept = {path: path.read_bytes() for path in self.unpushed if path.is_file()}
            with hub_errors(self.repo_id, "read"):
                self.revision = self.api.repo_info(self.repo_id, repo_type="dataset").sha
                self.api.snapshot_download(
                    repo_id=self.repo_id, repo_type="dataset", local_dir=self.local, revision=self.revision
                )
            for path, data in kept.items():  # the download replaced what the hub has not received yet
                write_bytes(path, data)
        return self.local

    def push(self, paths: list[Path], message: str, *, exclusive: bool = False) -> None:
        """Commit ``paths`` and every file of an earlier failed push; with ``exclusive``, only on
        top of the last pulled commit."""
        from huggingface_hub import CommitOperationAdd

        with self._lock:
            files = sorted({Path(p) for p in paths} | {p for p in self.unpushed if p.is_file()})
            operations = [
                CommitOperationAdd(path_in_repo=p.relative_to(self.local).as_posix(), path_or_fileobj=str(p))
                for p in files
            ]
            try:
                with hub_errors(self.repo_id, "push"):
                    try:
                        commit = self.api.create_commit(
                            repo_id=self.repo_id,
                            repo_type="dataset",
                            operations=operations,
                            commit_message=message,
                            parent_commit=self.revision if exclusive else None,
                        )
                    except HfHubHTTPError as error:
                        if exclusive and error.response is not None and error.response.status_code == 412:
                            raise PushConflict(
                                f"{self.repo_id} has a commit newer than the one read ({self.revision}); read it again"
                            ) from None
                        raise
            except PushError:
                # An exclusive change holds only on top of the commit it was made on: the caller
                # decides again after the next pull, so it is never resent blindly.
                if not exclusive:
                    self.unpushed.update(files)
                raise
            self.unpushed.clear()
            if exclusive:  # on top of what was read: the folder now stands at the new commit
                self.revision = getattr(commit, "oid", None) or self.revision
