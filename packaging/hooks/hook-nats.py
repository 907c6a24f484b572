"""PyInstaller hook: what nats-py (`serve --nats`) imports where PyInstaller cannot read it.

Its `nats/__init__.py` makes `nats` a namespace with `__import__("pkgutil").extend_path(...)`,
a call PyInstaller's bytecode scan does not follow: without pkgutil, `import nats` fails in
the frozen bridge and `--nats` stops it with "--nats needs nats-py".
"""

hiddenimports = ["pkgutil"]
