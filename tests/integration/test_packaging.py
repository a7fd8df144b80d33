"""Installation and packaging: `meson install --destdir` of the build under
test (ZEUSD_BUILD) and its file list, the installed unit, man pages, bash
completions and pkg-config file; and, when ZEUS_DEB_DIR names the output of
`make package` (scripts/package.sh), the Debian packages' contents,
maintainer scripts and lintian report."""
import json
import os
import re
import shutil
import subprocess
from pathlib import Path

import pytest

from conftest import BUILD, ROOT

SYSTEMD_SRC = ROOT / "packaging" / "systemd"
UNITS = [u for u in ("zeusd.service", "zeusd.socket", "zeusd-tcp.socket")
         if (SYSTEMD_SRC / u).is_file()]
VERSION = re.search(r"version : '([^']+)'",
                    (ROOT / "meson.build").read_text()).group(1)


def run(cmd, **kw):
    r = subprocess.run(cmd, capture_output=True, text=True, timeout=120, **kw)
    assert r.returncode == 0, f"{cmd}: {r.stdout}{r.stderr}"
    return r.stdout


# --- meson install -------------------------------------------------------------

@pytest.fixture(scope="module")
def installed(tmp_path_factory):
    """The build installed into a temp DESTDIR: (destdir, meson options)."""
    dest = tmp_path_factory.mktemp("destdir")
    run(["meson", "install", "-C", str(BUILD), "--destdir", str(dest),
         "--quiet"])
    opts = {o["name"]: o["value"] for o in json.loads(
        run(["meson", "introspect", "--buildoptions", str(BUILD)]))}
    return dest, opts


def at(dest, prefix, *parts):
    """A path under DESTDIR; parts relative to the prefix unless absolute."""
    p = Path(prefix).joinpath(*parts)
    return dest / p.relative_to("/")


def test_install_file_list(installed):
    dest, o = installed
    prefix, lib = o["prefix"], o["libdir"]
    want = [
        (o["bindir"], "zeusd"), (o["bindir"], "zeus"),
        (lib, "libzeus.so.0"), (lib, f"libzeus.so.{VERSION}"),
        (lib, "libzeus.so"), (lib, "pkgconfig", "zeus.pc"),
        (lib, "zeus", "libnvml-sim.so"),
        (lib, "zeus", "libamdsmi-sim24.so"),
        (lib, "zeus", "libamdsmi-sim25.so"),
        (lib, "zeus", "libamdsmi-sim26.so"),
        (o["includedir"], "zeus", "zeus.h"),
        (o["datadir"], "doc", "zeus", "LICENSE"),
    ]
    if (BUILD / "src" / "slurm" / "zeus_spank.so").exists():
        want.append((o["slurm_plugindir"] or f"{lib}/slurm-wlm",
                     "zeus_spank.so"))
    for parts in want:
        assert at(dest, prefix, *parts).exists(), parts
    assert os.readlink(at(dest, prefix, lib, "libzeus.so.0")) == \
        f"libzeus.so.{VERSION}"
    assert at(dest, prefix, o["datadir"], "doc", "zeus", "LICENSE") \
        .read_text() == (ROOT / "LICENSE").read_text()


def test_install_systemd_units_and_defaults(installed):
    dest, o = installed
    prefix = o["prefix"]
    unitdir = o["systemdsystemunitdir"] or (
        "/lib/systemd/system" if prefix == "/usr"
        else f"{prefix}/lib/systemd/system")
    assert UNITS, "packaging/systemd has no units"
    for u in UNITS:
        text = at(dest, prefix, unitdir, u).read_text()
        # the unit names this build's binary, whatever the source says
        for m in re.findall(r"^Exec\w+=(\S+zeusd)\b", text, re.M):
            assert m == f"{prefix}/{o['bindir']}/zeusd", (u, m)
        assert "@bindir@" not in text and "@sysconfdir@" not in text
        for m in re.findall(r"^EnvironmentFile=-?(\S+)", text, re.M):
            assert m == f"{prefix}/{o['sysconfdir']}/default/zeusd" or \
                m == f"{o['sysconfdir']}/default/zeusd", (u, m)
    if (SYSTEMD_SRC / "zeusd.defaults").is_file():
        assert at(dest, prefix, o["sysconfdir"], "default", "zeusd") \
            .read_text() == (SYSTEMD_SRC / "zeusd.defaults").read_text()


@pytest.mark.skipif(shutil.which("scdoc") is None, reason="scdoc missing")
def test_install_man_pages_render(installed):
    dest, o = installed
    for sect, page in (("man8", "zeusd.8"), ("man1", "zeus.1")):
        path = at(dest, o["prefix"], o["mandir"], sect, page)
        r = subprocess.run(["man", "--warnings", "-l", "-Tutf8", str(path)],
                           capture_output=True, text=True, timeout=60,
                           env=dict(os.environ, MANWIDTH="80"))
        assert r.returncode == 0 and not r.stderr, r.stderr
        text = re.sub(r".\x08", "", r.stdout)    # overstrike bold
        assert "SYNOPSIS" in text and "EXIT STATUS" in text
    man8 = at(dest, o["prefix"], o["mandir"], "man8", "zeusd.8").read_text()
    # every option of `zeusd serve --help` is documented
    helptext = run([str(BUILD / "zeusd"), "serve", "--help"])
    for opt in set(re.findall(r"(--[a-z][a-z0-9-]+)", helptext)):
        assert opt.replace("-", "\\-") in man8 or opt in man8, opt


COMPLETE = r"""
. /usr/share/bash-completion/bash_completion
. "$1"
shift
COMP_WORDS=("$@"); COMP_CWORD=$((${#COMP_WORDS[@]} - 1))
COMP_LINE="${COMP_WORDS[*]}"; COMP_POINT=${#COMP_LINE}
complete -p "$1" >/dev/null || exit 3
fn=$(complete -p "$1" | sed -E 's/.*-F ([^ ]+) .*/\1/')
$fn 2>/dev/null
printf '%s\n' "${COMPREPLY[@]}"
"""


@pytest.mark.skipif(not Path("/usr/share/bash-completion/bash_completion")
                    .exists(), reason="bash-completion missing")
@pytest.mark.parametrize("words,want", [
    (["zeusd", ""], {"serve", "token"}),
    (["zeusd", "serve", "--mode", ""], {"uds", "tcp"}),
    (["zeusd", "serve", "--enable", "gpu-read,m"], {"gpu-read,metrics"}),
    (["zeusd", "token", "issue", "--sc"], {"--scope"}),
    (["zeus", ""], {"measure", "gauge", "daemon"}),
    (["zeus", "daemon", ""], {"discover", "power", "set-power-limit"}),
    (["zeus", "measure", "--source", ""], {"auto", "direct", "zeusd"}),
    (["zeus", "measure", "--po"], {"--power-limit"}),
    (["zeus", "measure", "--gpu-c"], {"--gpu-clocks"}),
])
def test_bash_completion(installed, words, want):
    dest, o = installed
    comp = o["bashcompletiondir"] or (
        "/usr/share/bash-completion/completions" if o["prefix"] == "/usr"
        else f"{o['prefix']}/{o['datadir']}/bash-completion/completions")
    script = at(dest, o["prefix"], comp, words[0])
    out = run(["bash", "-c", COMPLETE, "complete", str(script), *words])
    assert want <= set(out.split()), out


def test_pkg_config_links(installed, tmp_path):
    """A program builds against the installed headers and libzeus.so.0
    through the installed zeus.pc, and runs."""
    dest, o = installed
    lib = at(dest, o["prefix"], o["libdir"])
    env = dict(os.environ, PKG_CONFIG_SYSROOT_DIR=str(dest),
               PKG_CONFIG_PATH=str(lib / "pkgconfig"))
    flags = run(["pkg-config", "--cflags", "--libs", "zeus"], env=env).split()
    src = tmp_path / "t.c"
    src.write_text('#include <stdio.h>\n#include <zeus/client.h>\n'
                   'int main(void) { printf("%d\\n", '
                   '(int)zeus_client_env_configured()); return 0; }\n')
    # an ASan+UBSan build's library needs the sanitizer runtimes linked in
    san = o.get("b_sanitize", "none")
    if isinstance(san, list):
        san = ",".join(san)
    if san and san != "none":
        flags.append(f"-fsanitize={san}")
    run(["cc", "-o", str(tmp_path / "t"), str(src), *flags])
    env = {k: v for k, v in os.environ.items()
           if not k.startswith("ZEUSD_")}
    env["LD_LIBRARY_PATH"] = str(lib)
    assert run([str(tmp_path / "t")], env=env) == "0\n"
    # the program really uses the shared library
    assert "libzeus.so.0" in run(["ldd", str(tmp_path / "t")], env=env)


# --- Debian packages (make package) ----------------------------------------------

DEB_DIR = os.environ.get("ZEUS_DEB_DIR")
needs_debs = pytest.mark.skipif(
    not DEB_DIR, reason="no ZEUS_DEB_DIR: run `make package`")
PACKAGES = {
    "zeusd": {"./usr/bin/zeusd", "./usr/share/man/man8/zeusd.8.gz",
              "./usr/share/bash-completion/completions/zeusd",
              "./usr/share/doc/zeusd/copyright",
              # the postinst's systemctl calls (debian/zeusd.postinst)
              "./usr/share/lintian/overrides/zeusd"}
    | {f"./lib/systemd/system/{u}" for u in UNITS}
    | ({"./etc/default/zeusd"}
       if (SYSTEMD_SRC / "zeusd.defaults").is_file() else set()),
    "libzeus0": {f"./usr/lib/{{triplet}}/libzeus.so.{VERSION}",
                 "./usr/lib/{triplet}/libzeus.so.0"},
    "libzeus-dev": {"./usr/include/zeus/zeus.h",
                    "./usr/include/zeus/client.h",
                    "./usr/lib/{triplet}/libzeus.so",
                    "./usr/lib/{triplet}/libzeus.a",
                    "./usr/lib/{triplet}/pkgconfig/zeus.pc"},
    "zeus-tools": {"./usr/bin/zeus", "./usr/share/man/man1/zeus.1.gz",
                   "./usr/share/bash-completion/completions/zeus"},
    "zeus-slurm": {"./usr/lib/{triplet}/slurm-wlm/zeus_spank.so"},
}


def deb(name):
    found = list(Path(DEB_DIR).glob(f"{name}_{VERSION}_*.deb"))
    assert len(found) == 1, (name, found)
    return found[0]


def contents(name):
    return {line.split()[5] for line in
            run(["dpkg-deb", "-c", str(deb(name))]).splitlines()}


@needs_debs
@pytest.mark.parametrize("name", sorted(PACKAGES))
def test_deb_contents(name):
    triplet = run(["dpkg-architecture", "-qDEB_HOST_MULTIARCH"]).strip()
    files = contents(name)
    want = {p.replace("{triplet}", triplet) for p in PACKAGES[name]}
    assert want <= files, want - files
    if name == "zeusd":
        for sim in ("libnvml-sim.so", "libamdsmi-sim24.so",
                    "libamdsmi-sim25.so", "libamdsmi-sim26.so"):
            assert f"./usr/lib/{triplet}/zeus/{sim}" in files
    # each file is in one package only
    others = set().union(*(contents(n) for n in PACKAGES if n != name))
    shared = {f for f in files & others if not f.endswith("/")}
    assert not shared, shared


@needs_debs
def test_deb_no_stray_files():
    """Nothing outside the documented places (no LICENSE copy, no tests,
    no benchmarks)."""
    for name in PACKAGES:
        for f in contents(name):
            assert not re.search(r"LICENSE|test_|sse_ref|sse_load|lib_bench",
                                 f), (name, f)


@needs_debs
def test_deb_control_and_scripts(tmp_path):
    info = run(["dpkg-deb", "-f", str(deb("zeusd"))])
    assert re.search(r"^Depends:.*\badduser\b", info, re.M), info
    dev = run(["dpkg-deb", "-f", str(deb("libzeus-dev")), "Depends"])
    assert f"libzeus0 (= {VERSION})" in dev
    ctl = tmp_path / "ctl"
    run(["dpkg-deb", "-e", str(deb("zeusd")), str(ctl)])
    postinst = (ctl / "postinst").read_text()
    assert "adduser --system" in postinst and "zeusd" in postinst
    # the user exists before the units (SocketGroup=zeusd) are started
    assert postinst.index("adduser --system") < \
        postinst.index("deb-systemd-helper")
    assert "deb-systemd-helper enable 'zeusd.service'" in postinst
    # an upgrade does not stop or restart zeusd with SIGTERM (which would
    # restore leased GPUs with --restore-on-shutdown): the postinst sends
    # SIGUSR2 to its main process, zeusd's restart that hands the leases
    # over, and only on an upgrade (a previous version in $2), after the
    # units were reloaded
    assert "_dh_action=restart" not in postinst, postinst
    preinst = (ctl / "preinst").read_text() \
        if (ctl / "preinst").exists() else ""
    assert "stop 'zeusd.service'" not in preinst, preinst
    prerm = (ctl / "prerm").read_text()
    assert re.search(r'"\$1" = remove .*\n\s*deb-systemd-invoke stop',
                     prerm), prerm
    usr2 = postinst.index("systemctl kill --kill-whom=main "
                          "--signal=SIGUSR2 zeusd.service")
    guard = postinst.rindex('if [ "$1" = configure ] && [ -n "$2" ]', 0,
                            usr2)
    assert postinst.index("daemon-reload") < guard, postinst
    assert "systemctl --quiet is-active zeusd.service" in \
        postinst[guard:usr2], postinst
    if "zeusd-tcp.socket" in UNITS:
        # --no-enable: enabled only where the admin had enabled it before
        assert "debian-installed 'zeusd-tcp.socket'" in postinst
    if (SYSTEMD_SRC / "zeusd.defaults").is_file():
        assert "/etc/default/zeusd" in (ctl / "conffiles").read_text()
    # the packaged unit runs the packaged binary
    root = tmp_path / "root"
    run(["dpkg-deb", "-x", str(deb("zeusd")), str(root)])
    unit = (root / "lib/systemd/system/zeusd.service").read_text()
    assert re.search(r"^ExecStart=/usr/bin/zeusd ", unit, re.M), unit
    assert run([str(root / "usr/bin/zeusd"), "--version"]).strip()


@needs_debs
def test_deb_lintian_clean():
    report = (Path(DEB_DIR) / "lintian.txt").read_text()
    bad = [l for l in report.splitlines() if re.match(r"[EW]: ", l)]
    assert not bad, "\n".join(bad)
