#!/bin/sh
# The browser playwright-core drives (its executablePath). Debian's own Chromium, never a
# downloaded one: make test installs it on the host. Inside the build chroot the sid root has no
# Chromium, but scripts/in-env mounts the host's tree at /host when the host has it; that binary
# needs the host's (Debian 12) libraries, so it runs chrooted into /host.
if [ -x /usr/bin/chromium ]; then
  exec /usr/bin/chromium "$@"
fi
if [ -x /host/usr/bin/chromium ]; then
  exec chroot /host /usr/bin/chromium "$@"
fi
echo "$0: no Chromium: neither /usr/bin/chromium nor /host/usr/bin/chromium exists (install Debian's chromium package on the host: apt-get install chromium)" >&2
exit 1
