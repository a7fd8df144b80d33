"""Local users made for a test module (useradd; removed again at its end
unless they existed before): the clients of the shared-node tests act as
real users."""
import grp
import pwd
import subprocess


def local_users(names, group=None):
    """A generator for a module fixture: makes each user of `names` that
    does not exist (listed in `group`, made too when missing, if given),
    yields `names`, then removes what it made."""
    undo = []
    if group is not None:
        try:
            grp.getgrnam(group)
        except KeyError:
            subprocess.run(["groupadd", group], check=True)
            undo.append(["groupdel", group])
    for u in names:
        try:
            pwd.getpwnam(u)
        except KeyError:
            extra = ["--groups", group] if group is not None else []
            subprocess.run(["useradd", "--no-create-home", "--shell",
                            "/usr/sbin/nologin", *extra, u], check=True)
            undo.insert(0, ["userdel", u])
    yield names
    for cmd in undo:
        subprocess.run(cmd, check=False)
