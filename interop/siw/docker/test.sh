#!/usr/bin/env bash
# make interop-docker: builds (or reuses) the iwarp-go/siw-peer image, then
# runs the scenarios of interop/siw/docker/*_test.go (build tag
# interopdocker) through it: rping both ways, iwtest's every operation both
# ways, an MPA variant through a module parameter, and the entry point's
# errors, with iwarp-peer on the host.
# Environment: IWARP_SIW_IMAGE (repository), IWARP_DOCKER_TIMEOUT (the whole
# go test run, default 20m), GO.
set -euo pipefail
HERE=$(cd "$(dirname "$0")" && pwd)
REPO=$(cd "$HERE/../../.." && pwd)
export PATH="/usr/local/go/bin:$HOME/go/bin:$PATH"
GO=${GO:-go}

"$HERE/image.sh" >/dev/null
cd "$REPO"
start=$(date +%s)
rc=0
"$GO" test -tags interopdocker -count=1 -v -timeout "${IWARP_DOCKER_TIMEOUT:-20m}" ./interop/siw/docker/ || rc=$?
echo "interop-docker: scenarios took $(($(date +%s) - start)) s"
exit $rc
