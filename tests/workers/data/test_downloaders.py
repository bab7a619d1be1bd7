"""The download paths, exercised without network: a local HTTP server stands in for UCI and a stub
`datasets.load_dataset` returns tiny in-memory Hugging Face datasets."""

from __future__ import annotations

import hashlib
import http.server
import io
import tarfile
import threading
import time
import zipfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import datasets
import numpy as np
import PIL.Image
import pytest
import torch

from workers.data import DataUnavailableError, clear_memory_cache, get_dataset
from workers.data import resolve as resolve_module
from workers.data.sources import hendrycks, tabular

# --- a local "UCI" -------------------------------------------------------------------------------------

ENERGY_HEADER = "X1,X2,X3,X4,X5,X6,X7,X8,Y1,Y2"


def _energy_rows(n: int) -> np.ndarray:
    rng = np.random.default_rng(0)
    features = rng.uniform(0, 10, size=(n, 8)).round(2)
    heating = (features @ np.arange(1, 9) / 10).round(2)
    return np.column_stack([features, heating, heating + 1])


def _zip_bytes(member: str, payload: bytes) -> bytes:
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w") as archive:
        archive.writestr(member, payload)
    return buffer.getvalue()


def _energy_csv_zip(rows: np.ndarray) -> bytes:
    lines = [ENERGY_HEADER, *(",".join(f"{v:g}" for v in row) for row in rows), ",,,,,,,,,"]
    return _zip_bytes("ENB2012_data.csv", "\n".join(lines).encode())


def _xlsx_bytes(header: list[str], rows: np.ndarray) -> bytes:
    """A minimal Office Open XML workbook as Excel writes it: header in shared strings, numbers inline."""
    ns = "http://schemas.openxmlformats.org/spreadsheetml/2006/main"
    letters = "ABCDEFGHIJ"
    shared = "".join(f"<si><t>{name}</t></si>" for name in header)
    header_cells = "".join(f'<c r="{letters[i]}1" t="s"><v>{i}</v></c>' for i in range(len(header)))
    body = "".join(
        f'<row r="{r + 2}">'
        + "".join(f'<c r="{letters[i]}{r + 2}"><v>{v:g}</v></c>' for i, v in enumerate(row))
        + "</row>"
        for r, row in enumerate(rows)
    )
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w") as archive:
        archive.writestr("[Content_Types].xml", "<Types/>")
        archive.writestr("xl/sharedStrings.xml", f'<sst xmlns="{ns}">{shared}</sst>')
        archive.writestr(
            "xl/worksheets/sheet1.xml",
            f'<worksheet xmlns="{ns}"><sheetData><row r="1">{header_cells}</row>{body}</sheetData></worksheet>',
        )
    return buffer.getvalue()


class _Server:
    def __init__(self, routes: dict[str, bytes]) -> None:
        self.routes = routes
        self.requests: list[str] = []
        self.delay_s = 0.0
        outer = self

        class Handler(http.server.BaseHTTPRequestHandler):
            def do_GET(self) -> None:
                outer.requests.append(self.path)
                time.sleep(outer.delay_s)
                body = outer.routes.get(self.path)
                self.send_response(200 if body is not None else 404)
                self.end_headers()
                self.wfile.write(body or b"not found")

            def log_message(self, *args: Any) -> None:  # keep test output clean
                pass

        self.httpd = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.thread = threading.Thread(target=self.httpd.serve_forever, daemon=True)

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.httpd.server_address[1]}"


@pytest.fixture
def local_server() -> Iterator[_Server]:
    server = _Server({})
    server.thread.start()
    yield server
    server.httpd.shutdown()
    server.httpd.server_close()


def test_energy_downloads_from_the_uci_zip_and_is_served_from_the_cache_afterwards(
    local_server: _Server, empty_cache: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    rows = _energy_rows(100)
    local_server.routes["/energy.zip"] = _energy_csv_zip(rows)
    monkeypatch.setattr(tabular, "ENERGY_URL", f"{local_server.url}/energy.zip")

    bundle = get_dataset("energy")
    assert bundle.source.startswith("download:")
    assert bundle.sizes() == {"train": 80, "val": 10, "test": 10}
    assert bundle.model_fields == {"num_features": 8, "num_outputs": 1}
    assert (empty_cache / "datasets" / "energy.npz").is_file()
    train_targets = rows[bundle.split_indices["train"], 8]
    assert bundle.target_std == pytest.approx(train_targets.std())
    assert local_server.requests == ["/energy.zip"]

    clear_memory_cache()
    local_server.routes.clear()  # a second call must not need the server
    again = get_dataset("energy", download=False)
    assert again.source.startswith("cache:")
    assert torch.equal(again.test.tensors[1], bundle.test.tensors[1])
    assert local_server.requests == ["/energy.zip"]


def test_energy_zip_with_the_original_xlsx_is_parsed() -> None:
    rows = _energy_rows(12)
    payload = _zip_bytes("ENB2012_data.xlsx", _xlsx_bytes(ENERGY_HEADER.split(","), rows))
    arrays = tabular.parse_energy_zip(payload)
    np.testing.assert_allclose(arrays["train_x"], rows[:, :8])
    np.testing.assert_allclose(arrays["train_y"], rows[:, 8])


def test_a_failed_download_raises_data_unavailable_naming_the_source(
    local_server: _Server, empty_cache: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(tabular, "ENERGY_URL", f"{local_server.url}/missing.zip")
    with pytest.raises(DataUnavailableError, match=r"download from UCI .* failed \(HTTPError"):
        get_dataset("energy")
    assert not (empty_cache / "datasets" / "energy.npz").exists()


def test_downloads_run_under_a_file_lock_in_the_cache_dir(
    local_server: _Server, empty_cache: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    local_server.routes["/energy.zip"] = _energy_csv_zip(_energy_rows(40))
    monkeypatch.setattr(tabular, "ENERGY_URL", f"{local_server.url}/energy.zip")
    real_lock = resolve_module.FileLock
    locks: list[str] = []

    def recording_lock(path: str, **kwargs: Any) -> Any:
        locks.append(path)
        lock = real_lock(path, **kwargs)
        original_enter = lock.__enter__

        def enter() -> Any:
            result = original_enter()
            assert not (empty_cache / "datasets" / "energy.npz").exists(), "lock taken before writing"
            return result

        lock.__enter__ = enter  # type: ignore[method-assign]
        return lock

    monkeypatch.setattr(resolve_module, "FileLock", recording_lock)
    get_dataset("energy")
    assert locks == [str(empty_cache / "datasets" / "energy.lock")]


def test_concurrent_first_calls_download_once(
    local_server: _Server, empty_cache: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    local_server.routes["/energy.zip"] = _energy_csv_zip(_energy_rows(50))
    local_server.delay_s = 0.5  # the second caller arrives while the first is still downloading
    monkeypatch.setattr(tabular, "ENERGY_URL", f"{local_server.url}/energy.zip")
    sources: list[str] = []
    threads = [
        threading.Thread(target=lambda: sources.append(get_dataset("energy").source)) for _ in range(2)
    ]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=30)
    assert local_server.requests == ["/energy.zip"]
    assert sorted(source.split(":")[0] for source in sources) == ["cache", "download"]


# --- a stub Hugging Face Hub ---------------------------------------------------------------------------


def _image_split(
    n: int, *, size: int, channels: int, image_column: str, label_column: str, seed: int
) -> datasets.Dataset:
    rng = np.random.default_rng(seed)
    shape = (size, size, channels) if channels == 3 else (size, size)
    pictures = [PIL.Image.fromarray(rng.integers(0, 256, shape, dtype=np.uint8)) for _ in range(n)]
    features = datasets.Features(
        {image_column: datasets.Image(), label_column: datasets.ClassLabel(num_classes=10)}
    )
    return datasets.Dataset.from_dict(
        {image_column: pictures, label_column: [i % 10 for i in range(n)]}, features=features
    )


@pytest.fixture
def hub_calls(monkeypatch: pytest.MonkeyPatch) -> list[tuple[Any, ...]]:
    calls: list[tuple[Any, ...]] = []

    def fake_load_dataset(path: str, name: str | None = None, **kwargs: Any) -> datasets.DatasetDict:
        calls.append((path, name))
        if path == "uoft-cs/cifar10":
            return datasets.DatasetDict(
                train=_image_split(40, size=32, channels=3, image_column="img", label_column="label", seed=1),
                test=_image_split(10, size=32, channels=3, image_column="img", label_column="label", seed=2),
            )
        if path == "ylecun/mnist":
            return datasets.DatasetDict(
                train=_image_split(
                    30, size=28, channels=1, image_column="image", label_column="label", seed=3
                ),
                test=_image_split(
                    10, size=28, channels=1, image_column="image", label_column="label", seed=4
                ),
            )
        if path == "stanfordnlp/sst2":

            def split(sentences: list[str], labels: list[int]) -> datasets.Dataset:
                return datasets.Dataset.from_dict(
                    {"idx": list(range(len(labels))), "sentence": sentences, "label": labels}
                )

            good, bad = "a gorgeous , witty film ", "a dull , lifeless mess "
            return datasets.DatasetDict(
                train=split([good, bad] * 10, [1, 0] * 10),
                validation=split([good + "indeed", bad + "sadly"], [1, 0]),
                test=split(["unlabelled"], [-1]),
            )
        if path == "batterydata/pos_tagging":
            tags = datasets.List(datasets.ClassLabel(names=["DT", "NN", "VBZ"]))
            features = datasets.Features({"words": datasets.List(datasets.Value("string")), "labels": tags})

            def split(n: int) -> datasets.Dataset:
                return datasets.Dataset.from_dict(
                    {"words": [["The", "cat", "sleeps"]] * n, "labels": [[0, 1, 2]] * n}, features=features
                )

            return datasets.DatasetDict(train=split(20), test=split(5))
        if path == "ptb-text-only/ptb_text_only":

            def split(n: int) -> datasets.Dataset:
                return datasets.Dataset.from_dict({"sentence": ["the cat sat on the mat"] * n})

            return datasets.DatasetDict(train=split(30), validation=split(4), test=split(4))
        raise AssertionError(f"unexpected Hub dataset {path}")

    monkeypatch.setattr(datasets, "load_dataset", fake_load_dataset)
    return calls


def test_cifar10_downloads_through_the_hub_and_caches_npz(
    hub_calls: list[tuple[Any, ...]], empty_cache: Path
) -> None:
    bundle = get_dataset("cifar10")
    assert hub_calls == [("uoft-cs/cifar10", None)]
    assert bundle.sizes() == {"train": 36, "val": 4, "test": 10}
    x, y = bundle.train.tensors
    assert x.shape == (36, 3, 32, 32) and x.dtype == torch.float32
    assert y.dtype == torch.int64 and int(y.max()) <= 9
    assert bundle.model_fields == {"image_size": 32, "in_channels": 3, "num_classes": 10}
    assert (empty_cache / "datasets" / "cifar10.npz").is_file()

    clear_memory_cache()
    corrupted = get_dataset("cifar10_c", download=False)  # shares cifar10's cached arrays
    assert corrupted.source.startswith("cache:")
    assert hub_calls == [("uoft-cs/cifar10", None)]
    assert torch.equal(corrupted.test.tensors[0], bundle.test.tensors[0])
    assert set(corrupted.eval_sets) == {"gaussian_noise", "motion_blur", "brightness"}
    assert corrupted.eval_sets["brightness"].tensors[0].shape == (10, 3, 32, 32)


def test_grey_hub_images_get_a_channel_axis(hub_calls: list[tuple[Any, ...]], empty_cache: Path) -> None:
    bundle = get_dataset("mnist")
    assert bundle.train.tensors[0].shape[1:] == (1, 28, 28)
    assert bundle.stand_in_for is None


def test_sst2_uses_the_official_validation_split_as_test(
    hub_calls: list[tuple[Any, ...]], empty_cache: Path
) -> None:
    bundle = get_dataset("sst2")
    assert bundle.sizes() == {"train": 18, "val": 2, "test": 2}
    assert bundle.test.tensors[1].tolist() == [1, 0]
    assert bundle.model_fields["num_classes"] == 2 and bundle.model_fields["head"] == "sequence"
    # "indeed" and "sadly" only occur in the test sentences: unknown words, id 1
    assert int((bundle.test.tensors[0] == 1).sum()) == 2


def test_pos_tags_stored_as_class_label_ids_are_mapped_to_tag_names(
    hub_calls: list[tuple[Any, ...]], empty_cache: Path
) -> None:
    bundle = get_dataset("ptb_pos")
    assert bundle.class_names == ("DT", "NN", "VBZ")
    assert bundle.train.tensors[1][0, :4].tolist() == [0, 1, 2, -100]


def test_ptb_lm_keeps_the_three_official_splits(hub_calls: list[tuple[Any, ...]], empty_cache: Path) -> None:
    bundle = get_dataset("ptb_lm")
    assert bundle.pools == {"train": "train", "val": "val", "test": "test"}
    assert bundle.model_fields["head"] == "lm"
    # 6 words + <eos> per sentence, 30 sentences, block 128: 209 targets -> 2 blocks
    assert len(bundle.train) == 2


# --- the published CIFAR-10-C from a local "Zenodo" ------------------------------------------------------

C_PER_SEVERITY = 10  # the stub CIFAR-10 test split holds 10 images


def _cifar10_c_arrays() -> dict[str, np.ndarray]:
    rng = np.random.default_rng(7)
    arrays = {
        name: rng.integers(0, 256, (5 * C_PER_SEVERITY, 32, 32, 3), dtype=np.uint8)
        for name in hendrycks.HENDRYCKS_CORRUPTIONS
    }
    arrays["labels"] = np.tile(np.arange(C_PER_SEVERITY) % 10, 5).astype(np.uint8)
    return arrays


def _cifar10_c_tar(arrays: dict[str, np.ndarray], *, leave_out: str | None = None) -> bytes:
    buffer = io.BytesIO()
    with tarfile.open(fileobj=buffer, mode="w") as archive:
        for name, array in arrays.items():
            if name == leave_out:
                continue
            payload = io.BytesIO()
            np.save(payload, array)
            info = tarfile.TarInfo(f"CIFAR-10-C/{name}.npy")
            info.size = payload.tell()
            payload.seek(0)
            archive.addfile(info, payload)
    return buffer.getvalue()


@pytest.fixture
def zenodo(
    local_server: _Server, empty_cache: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> tuple[_Server, dict[str, np.ndarray]]:
    monkeypatch.setenv("NORMLAB_OFFLINE_DATA", str(tmp_path / "offline"))
    arrays = _cifar10_c_arrays()
    payload = _cifar10_c_tar(arrays)
    local_server.routes["/records/2535967/files/CIFAR-10-C.tar"] = payload
    monkeypatch.setattr(
        hendrycks, "CIFAR10_C_URL", f"{local_server.url}/records/2535967/files/CIFAR-10-C.tar"
    )
    monkeypatch.setattr(hendrycks, "CIFAR10_C_MD5", hashlib.md5(payload).hexdigest())
    return local_server, arrays


def _standardised(bundle: Any, images: np.ndarray) -> torch.Tensor:
    unit = torch.from_numpy(images).permute(0, 3, 1, 2).float() / 255.0
    return (unit - torch.tensor(bundle.pixel_mean).view(1, -1, 1, 1)) / torch.tensor(bundle.pixel_std).view(
        1, -1, 1, 1
    )


def test_published_cifar10_c_downloads_once_and_serves_the_chosen_corruptions_and_severities(
    zenodo: tuple[_Server, dict[str, np.ndarray]], hub_calls: list[tuple[Any, ...]], empty_cache: Path
) -> None:
    server, arrays = zenodo
    bundle = get_dataset("cifar10_c_hendrycks", corruptions=["fog", "brightness"], severities=[2, 5])
    assert list(bundle.eval_sets) == ["fog_s2", "fog_s5", "brightness_s2", "brightness_s5"]
    for name in ("fog", "brightness"):
        for severity in (2, 5):
            block = slice((severity - 1) * C_PER_SEVERITY, severity * C_PER_SEVERITY)
            x, y = bundle.eval_sets[f"{name}_s{severity}"].tensors
            torch.testing.assert_close(x, _standardised(bundle, arrays[name][block]))
            assert y.dtype == torch.int64 and y.tolist() == arrays["labels"][block].tolist()
    assert bundle.stand_in_for is None and bundle.mirror_symmetric
    cached = empty_cache / "datasets" / "cifar10_c_hendrycks"
    assert sorted(p.name for p in cached.iterdir()) == sorted(f"{n}.npy" for n in arrays)
    assert server.requests == ["/records/2535967/files/CIFAR-10-C.tar"]

    clear_memory_cache()
    server.routes.clear()  # the second call must not need the server
    again = get_dataset("cifar10_c_hendrycks", download=False)
    assert list(again.eval_sets) == ["gaussian_noise", "motion_blur", "brightness"]  # defaults, severity 3
    block = slice(2 * C_PER_SEVERITY, 3 * C_PER_SEVERITY)
    torch.testing.assert_close(
        again.eval_sets["brightness"].tensors[0], _standardised(again, arrays["brightness"][block])
    )
    assert len(server.requests) == 1


def test_published_cifar10_c_with_a_wrong_checksum_is_refused_and_leaves_nothing(
    zenodo: tuple[_Server, dict[str, np.ndarray]],
    hub_calls: list[tuple[Any, ...]],
    empty_cache: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(hendrycks, "CIFAR10_C_MD5", "0" * 32)
    with pytest.raises(DataUnavailableError, match=r"download from Zenodo .* failed \(ValueError: MD5"):
        get_dataset("cifar10_c_hendrycks")
    assert [p.name for p in (empty_cache / "datasets").iterdir() if "hendrycks" in p.name] == [
        "cifar10_c_hendrycks.lock"
    ]


def test_published_cifar10_c_archive_without_a_corruption_is_refused(
    zenodo: tuple[_Server, dict[str, np.ndarray]],
    hub_calls: list[tuple[Any, ...]],
    empty_cache: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    server, arrays = zenodo
    payload = _cifar10_c_tar(arrays, leave_out="snow")
    server.routes["/records/2535967/files/CIFAR-10-C.tar"] = payload
    monkeypatch.setattr(hendrycks, "CIFAR10_C_MD5", hashlib.md5(payload).hexdigest())
    with pytest.raises(DataUnavailableError, match=r"lacks snow\.npy"):
        get_dataset("cifar10_c_hendrycks")
    assert not (empty_cache / "datasets" / "cifar10_c_hendrycks").exists()


def test_an_extracted_cifar10_c_in_the_offline_dir_needs_no_network(
    zenodo: tuple[_Server, dict[str, np.ndarray]], hub_calls: list[tuple[Any, ...]], tmp_path: Path
) -> None:
    server, arrays = zenodo
    extracted = tmp_path / "offline" / "CIFAR-10-C"
    extracted.mkdir(parents=True)
    for name, array in arrays.items():
        np.save(extracted / f"{name}.npy", array)
    bundle = get_dataset("cifar10_c_hendrycks", corruptions=["snow"], severities=[1])
    torch.testing.assert_close(
        bundle.eval_sets["snow"].tensors[0], _standardised(bundle, arrays["snow"][:C_PER_SEVERITY])
    )
    assert server.requests == []


def test_published_cifar10_c_without_download_names_zenodo_and_the_offline_dir(
    zenodo: tuple[_Server, dict[str, np.ndarray]], hub_calls: list[tuple[Any, ...]], tmp_path: Path
) -> None:
    get_dataset("cifar10")  # the clean CIFAR-10 is cached; only the corrupted arrays are missing
    clear_memory_cache()
    with pytest.raises(DataUnavailableError) as raised:
        get_dataset("cifar10_c_hendrycks", download=False)
    message = str(raised.value)
    assert "download=False" in message and "CIFAR-10-C.tar" in message
    assert str(tmp_path / "offline" / "CIFAR-10-C") in message
    with pytest.raises(ValueError, match="unknown corruptions"):
        get_dataset("cifar10_c_hendrycks", corruptions=["blur"])
