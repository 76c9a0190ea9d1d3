#!/bin/sh
# Installs Debian's Chromium (/usr/bin/chromium) for the browser tests of the approvals page
# (capability-cli/tests/it/approvals_page.rs calls this script when no Chromium is found). The
# browser comes from the distribution, never a download of its own: puppeteer-core drives it
# over the DevTools protocol. apt-get needs root, as on CI and the development machines.
set -eu
if command -v chromium >/dev/null 2>&1; then
    exit 0
fi
if [ "$(id -u)" != 0 ]; then
    echo "install-chromium.sh: needs root to run apt-get install chromium" >&2
    exit 1
fi
export DEBIAN_FRONTEND=noninteractive
apt-get update -qq
apt-get install -y -qq --no-install-recommends chromium
command -v chromium
