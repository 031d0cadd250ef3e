#!/usr/bin/env bash
# Checks the Debian package `make deb` built (make deb-test): its contents and conffile, its unit
# (systemd-analyze verify, on the package's files), then installs it with apt into a fresh Debian sid
# root (mmdebstrap; its dependencies come from the mirror) and serves the tiny test model from the
# installed binary there.
# Usage: tests/deb/run.sh DEB_DIR TINY_MODEL   (as root on the host: mmdebstrap and chroot)
set -euo pipefail
deb=$(ls "$1"/prefixd_*.deb | head -n 1)
model=$(realpath "$2")
here=$(cd "$(dirname "$0")" && pwd)
work=$(mktemp -d /tmp/prefixd-deb-test-XXXXXX)
pid=
cleanup() {
  [ -n "$pid" ] && kill "$pid" 2>/dev/null || true
  for m in proc dev sys; do umount -l "$work/root/$m" 2>/dev/null || true; done
  rm -rf "$work"
}
trap cleanup EXIT

echo "package: $deb"
contents=$(dpkg-deb -c "$deb")
for path in ./usr/bin/prefixd ./usr/bin/prefixd-bench ./usr/bin/prefixd-mkmodel \
            ./usr/share/man/man1/prefixd.1.gz ./etc/prefixd/prefixd.toml ./usr/share/doc/prefixd/operator-guide.md.gz; do
  grep -q " $path\$" <<<"$contents" || { echo "the package lacks $path" >&2; exit 1; }
done
# debhelper puts units in /usr/lib/systemd/system (or /lib/systemd/system before the /usr merge).
unit=$(grep -o '\./\(usr/\)\?lib/systemd/system/prefixd\.service$' <<<"$contents" || true)
[ -n "$unit" ] || { echo "the package lacks prefixd.service" >&2; exit 1; }
dpkg-deb -e "$deb" "$work/control"
grep -qx /etc/prefixd/prefixd.toml "$work/control/conffiles" || { echo "the configuration is no conffile" >&2; exit 1; }
grep -q '^Depends: .*libllama' "$work/control/control" || { echo "no dependency on libllama" >&2; exit 1; }

# The unit, with the package's files as its root.
dpkg-deb -x "$deb" "$work/files"
scripts=$(cd "$here/../.." && pwd)/scripts
# --man=no: the build root has no man program to open Documentation='s page with (the package's
# own page is checked above).
"$scripts/in-env" systemd-analyze verify --man=no --root="$work/files" "$work/files/${unit#./}"
exposure=$("$scripts/in-env" systemd-analyze security --offline=yes --root="$work/files" prefixd.service | tail -n 1)
echo "unit verified; $exposure"

# A fresh root with the package installed by apt, then the installed server.
mmdebstrap --variant=apt --quiet --aptopt='Acquire::Check-Valid-Until "false"' \
  --customize-hook="copy-in $deb /tmp" \
  --customize-hook="chroot \"\$1\" apt-get install -y -qq /tmp/$(basename "$deb")" \
  sid "$work/root" http://deb.debian.org/debian
cp "$model" "$work/root/tmp/tiny.gguf"
for m in proc dev sys; do mount --bind "/$m" "$work/root/$m"; done
port=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
chroot "$work/root" /usr/bin/prefixd serve --model /tmp/tiny.gguf --port "$port" --ctx-size 2048 --threads 1 \
  --no-cache-disk > "$work/serve.log" 2>&1 &
pid=$!
for _ in $(seq 1 300); do
  if curl -fs "http://127.0.0.1:$port/health" > /dev/null; then break; fi
  kill -0 "$pid" 2>/dev/null || { cat "$work/serve.log" >&2; echo "the installed prefixd exited" >&2; exit 1; }
  sleep 0.2
done
reply=$(curl -fs "http://127.0.0.1:$port/v1/completions" -H 'Content-Type: application/json' \
  -d '{"prompt": "Hello", "max_tokens": 2}')
grep -q '"choices"' <<<"$reply" || { echo "no completion: $reply" >&2; exit 1; }
echo "ok: the package installs into a fresh sid root with apt and its prefixd serves"
