"""scripts/win-deps.sh's download side (docs/windows.md): the archive the
pinned source tarballs come from is the machine's own apt sources, as apt
reads them (one-line .list and deb822 .sources, deb and deb-src), Debian's
main archive first; none configured is a clear error; what an archive
serves is checked against the pinned sha256. Offline: each test gives apt
a configuration of its own (APT_CONFIG: its sources, its lists folder) and
file: archives in a temporary folder; nothing is built."""
import shutil
import subprocess
from pathlib import Path

import pytest

from conftest import ROOT, build_sanitizers

SCRIPT = ROOT / "scripts" / "win-deps.sh"
APT_HELPER = Path("/usr/lib/apt/apt-helper")

if shutil.which("apt-get") is None or not APT_HELPER.exists():
    pytest.skip("no apt (win-deps.sh takes its archive from apt's sources)",
                allow_module_level=True)
if build_sanitizers():
    pytest.skip("a shell script: once, with the plain build",
                allow_module_level=True)


def apt_conf(tmp_path, sources_list="", parts=None, lists=None):
    """An apt configuration of its own: sources.list, sources.list.d files
    (name: text) and lists/ files (the Release files of `apt-get update`)."""
    d = tmp_path / "apt"
    for sub in ("parts", "lists/partial", "cache"):
        (d / sub).mkdir(parents=True, exist_ok=True)
    (d / "sources.list").write_text(sources_list)
    for name, text in (parts or {}).items():
        (d / "parts" / name).write_text(text)
    for name, text in (lists or {}).items():
        (d / "lists" / name).write_text(text)
    conf = d / "apt.conf"
    conf.write_text(
        f'Dir::Etc::SourceList "{d}/sources.list";\n'
        f'Dir::Etc::SourceParts "{d}/parts";\n'
        f'Dir::State::Lists "{d}/lists";\n'
        f'Dir::Cache "{d}/cache";\n')
    return conf


def win_deps(tmp_path, conf, *args, env=None):
    e = {"PATH": "/usr/sbin:/usr/bin:/sbin:/bin", "APT_CONFIG": str(conf),
         "ZEUS_WIN_CACHE": str(tmp_path / "cache"), "HOME": str(tmp_path)}
    e.update(env or {})
    return subprocess.run(["sh", str(SCRIPT), *args], capture_output=True,
                          text=True, env=e, timeout=60)


def test_no_archive_host_in_the_script():
    text = SCRIPT.read_text()
    assert "debian.org" not in text
    assert "http://" not in text and "https://" not in text


def test_one_line_sources_main_archive_first(tmp_path):
    conf = apt_conf(tmp_path, sources_list=(
        "deb-src http://a.invalid/debian-security bookworm-security main\n"
        "# a comment\n"
        "deb [arch=amd64] http://a.invalid/debian bookworm-backports main\n"
        "deb-src http://a.invalid/debian bookworm main contrib\n"
        "deb http://b.invalid/apt stable main\n"))
    r = win_deps(tmp_path, conf, "sources")
    assert r.returncode == 0, r.stderr
    assert r.stdout.split() == [
        "http://a.invalid/debian/",          # bookworm: a plain suite
        "http://b.invalid/apt/",             # no Release file: maybe Debian
        "http://a.invalid/debian-security/",  # security only: last
    ]


def test_deb822_sources(tmp_path):
    conf = apt_conf(tmp_path, parts={"x.sources": (
        "Types: deb deb-src\n"
        "URIs: http://m1.invalid/debian-security\n"
        "Suites: bookworm-security\n"
        "Components: main\n"
        "\n"
        "Types: deb-src\n"
        "URIs: http://m2.invalid/debian/ http://m3.invalid/debian\n"
        "Suites: bookworm bookworm-updates\n"
        "Components: main\n"
        "\n"
        "Enabled: no\n"
        "Types: deb\n"
        "URIs: http://off.invalid/debian\n"
        "Suites: bookworm\n"
        "Components: main\n"),
        # not a sources file: apt ignores it, so does the script
        "y.sources.disabled": (
            "Types: deb\nURIs: http://ignored.invalid/debian\n"
            "Suites: bookworm\nComponents: main\n")})
    r = win_deps(tmp_path, conf, "sources")
    assert r.returncode == 0, r.stderr
    assert r.stdout.split() == ["http://m2.invalid/debian/",
                                "http://m3.invalid/debian/",
                                "http://m1.invalid/debian-security/"]


def test_release_labels_rank_the_archives(tmp_path):
    """Once `apt-get update` has the Release files, their Label decides:
    "Debian" first, then what apt knows nothing of yet, then the rest
    (Debian-Security, another archive)."""
    arch = subprocess.run(["dpkg", "--print-architecture"],
                          capture_output=True, text=True).stdout.strip()

    def release(label, suite):
        return (f"Origin: X\nLabel: {label}\nSuite: {suite}\n"
                f"Codename: {suite}\n")
    conf = apt_conf(tmp_path, sources_list=(
        "deb http://other.invalid/apt stable main\n"
        "deb http://sec.invalid/debian-security bookworm-security main\n"
        "deb http://new.invalid/debian bookworm main\n"
        "deb http://deb.invalid/debian bookworm main\n"), lists={
        "other.invalid_apt_dists_stable_InRelease":
            release("Other", "stable"),
        f"other.invalid_apt_dists_stable_main_binary-{arch}_Packages": "",
        "sec.invalid_debian-security_dists_bookworm-security_InRelease":
            release("Debian-Security", "bookworm-security"),
        "sec.invalid_debian-security_dists_bookworm-security_main_"
        f"binary-{arch}_Packages": "",
        "deb.invalid_debian_dists_bookworm_InRelease":
            release("Debian", "bookworm"),
        f"deb.invalid_debian_dists_bookworm_main_binary-{arch}_Packages":
            "",
    })
    r = win_deps(tmp_path, conf, "sources")
    assert r.returncode == 0, r.stderr
    assert r.stdout.split() == ["http://deb.invalid/debian/",
                                "http://new.invalid/debian/",
                                "http://other.invalid/apt/",
                                "http://sec.invalid/debian-security/"]


def test_no_source_is_a_clear_error(tmp_path):
    conf = apt_conf(tmp_path, sources_list="# nothing\n")
    for cmd in ("sources", "fetch"):
        r = win_deps(tmp_path, conf, cmd)
        assert r.returncode == 1, (cmd, r.stdout, r.stderr)
        assert "apt has no source" in r.stderr
        assert "sources.list" in r.stderr
    assert not list((tmp_path / "cache" / "src").glob("*"))


def test_mirror_variable_replaces_apt_sources(tmp_path):
    conf = apt_conf(tmp_path, sources_list="# nothing\n")
    r = win_deps(tmp_path, conf, "sources",
                 env={"ZEUS_DEBIAN_MIRROR": "file:/srv/mirror/debian"})
    assert r.returncode == 0, r.stderr
    assert r.stdout.split() == ["file:/srv/mirror/debian/"]


def test_what_an_archive_serves_must_match_the_pinned_sha256(tmp_path):
    """A file: archive (a local mirror) whose tarball is not the pinned
    one, and one that lacks it: each is tried, each refused, with apt's
    reason, and nothing is left in the cache."""
    bad = tmp_path / "bad"
    pool = bad / "pool/main/libm/libmicrohttpd"
    pool.mkdir(parents=True)
    (pool / "libmicrohttpd_0.9.75.orig.tar.xz").write_text("not it\n")
    empty = tmp_path / "empty"
    empty.mkdir()
    conf = apt_conf(tmp_path, parts={"local.sources": (
        "Types: deb-src\n"
        f"URIs: file:{bad} file:{empty}\n"
        "Suites: bookworm\nComponents: main\n")})
    r = win_deps(tmp_path, conf, "fetch")
    assert r.returncode == 1, r.stderr
    assert f"fetching file:{bad}/pool/main/libm/libmicrohttpd/" in r.stderr
    assert f"fetching file:{empty}/pool/main/libm/libmicrohttpd/" in r.stderr
    assert "Hash Sum mismatch" in r.stderr
    assert "could not fetch libmicrohttpd_0.9.75.orig.tar.xz" in r.stderr
    src = tmp_path / "cache" / "src"
    assert [p.name for p in src.iterdir()] == []
