#!/usr/bin/env bash
# Open a report.html in headless Chromium, as a reader would, and save a screenshot of its first screen.
#
#   bash scripts/report_screenshot.sh REPORT_DIR/report.html OUT.png [WIDTHxHEIGHT]
#
# Needs Debian's chromium (apt-get update && apt-get install -y chromium). The page loads nothing from
# a network; --no-sandbox because the script usually runs as root in a container.
set -euo pipefail
page=${1:?usage: report_screenshot.sh REPORT.html OUT.png [WIDTHxHEIGHT]}
out=${2:?usage: report_screenshot.sh REPORT.html OUT.png [WIDTHxHEIGHT]}
size=${3:-1280x2000}
browser=$(command -v chromium || command -v chromium-browser || true)
if [ -z "$browser" ]; then
  echo "report_screenshot.sh: chromium not found: apt-get update && apt-get install -y chromium" >&2
  exit 2
fi
[ -f "$page" ] || { echo "report_screenshot.sh: $page: no such file" >&2; exit 3; }
profile=$(mktemp -d)
trap 'rm -rf "$profile"' EXIT
"$browser" --headless --no-sandbox --disable-gpu --hide-scrollbars --user-data-dir="$profile" \
  --window-size="${size/x/,}" --screenshot="$(realpath -m "$out")" "file://$(realpath "$page")" \
  >/dev/null 2>&1
[ -s "$out" ] || { echo "report_screenshot.sh: chromium wrote no screenshot" >&2; exit 1; }
echo "wrote $out"
