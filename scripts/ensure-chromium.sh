#!/usr/bin/env bash
# Debian's Chromium for the tests that open pages and SVGs in a real browser.
# Installs it with apt-get when missing (as root, or with passwordless sudo); otherwise those
# tests skip with a message saying so. Never downloads a browser build of its own.
set -u
if command -v chromium >/dev/null 2>&1 || [ -x /usr/bin/chromium ]; then
    exit 0
fi
sudo=""
if [ "$(id -u)" != 0 ]; then
    command -v sudo >/dev/null 2>&1 && sudo -n true 2>/dev/null || {
        echo "planrail tests: chromium missing and no root to install it; browser tests will skip" >&2
        exit 0
    }
    sudo="sudo -n"
fi
command -v apt-get >/dev/null 2>&1 || {
    echo "planrail tests: chromium missing and no apt-get; browser tests will skip" >&2
    exit 0
}
echo "planrail tests: installing Debian's chromium (one time)..." >&2
$sudo env DEBIAN_FRONTEND=noninteractive apt-get update -qq >/dev/null 2>&1
$sudo env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq chromium >/dev/null 2>&1 ||
    echo "planrail tests: could not install chromium; browser tests will skip" >&2
exit 0
