#!/usr/bin/env bash
# Vendors the page's charting library, Apache ECharts, from its npm package into
# internal/page/assets, where go:embed puts it in the binary: the page and report.html
# then work offline, with no CDN. The package's checksum is pinned, so the output is
# reproducible; `make generate` runs this and CI checks the result is committed.
set -euo pipefail
cd "$(dirname "$0")/.."
VERSION=6.1.0
SHA256=681aff88cc1038c3fa941a3a53d1b177a52250b05335efc607d6105ae13be481
OUT=internal/page/assets
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
(cd "$tmp" && npm pack --silent "echarts@$VERSION" >/dev/null)
echo "$SHA256  $tmp/echarts-$VERSION.tgz" | sha256sum -c --quiet
tar -xzf "$tmp/echarts-$VERSION.tgz" -C "$tmp" package/dist/echarts.min.js package/LICENSE
cp "$tmp/package/dist/echarts.min.js" "$OUT/echarts.min.js"
cp "$tmp/package/LICENSE" "$OUT/ECHARTS-LICENSE"
echo "echarts $VERSION" >"$OUT/VERSION"
