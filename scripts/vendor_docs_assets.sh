#!/usr/bin/env bash
# Refresh the Swagger UI and ReDoc files that /docs and /redoc serve from app/static/vendor/,
# so the interactive docs need no CDN. Downloads the pinned npm packages with `npm pack` (npm
# checks each tarball against the registry's integrity hash), copies only the files the pages
# load plus the licences, and rewrites app/static/vendor/README.md.
#
#   scripts/vendor_docs_assets.sh                      # the pinned versions below
#   SWAGGER_UI_VERSION=5.35.0 REDOC_VERSION=2.5.4 scripts/vendor_docs_assets.sh
#
# ReDoc stays on 2.x: app/routes/docs.py uses FastAPI's ReDoc page, written for redoc@2.
set -euo pipefail

SWAGGER_UI_VERSION="${SWAGGER_UI_VERSION:-5.35.0}"
REDOC_VERSION="${REDOC_VERSION:-2.5.4}"

root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
vendor="$root/app/static/vendor"
work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT

cd "$work"
npm pack --silent "swagger-ui-dist@$SWAGGER_UI_VERSION" "redoc@$REDOC_VERSION" >/dev/null
mkdir swagger-ui redoc
tar -xzf "swagger-ui-dist-$SWAGGER_UI_VERSION.tgz" -C swagger-ui
tar -xzf "redoc-$REDOC_VERSION.tgz" -C redoc

rm -rf "$vendor/swagger-ui" "$vendor/redoc"
mkdir -p "$vendor/swagger-ui" "$vendor/redoc"
for name in swagger-ui-bundle.js swagger-ui-bundle.js.LICENSE.txt swagger-ui.css \
            favicon-32x32.png LICENSE NOTICE; do
    cp "swagger-ui/package/$name" "$vendor/swagger-ui/$name"
done
for name in bundles/redoc.standalone.js bundles/redoc.standalone.js.LICENSE.txt LICENSE; do
    cp "redoc/package/$name" "$vendor/redoc/$(basename "$name")"
done

license() { node -p "require('./$1/package/package.json').license"; }
sums="$(cd "$vendor" && sha256sum swagger-ui/* redoc/* | sed 's/^/    /')"
cat > "$vendor/README.md" <<README
# Vendored documentation assets

\`/docs\` (Swagger UI) and \`/redoc\` (ReDoc) load these files from the service itself
(\`/static/vendor/...\`, see \`app/routes/docs.py\`), so the docs work with no internet. They
are the packages' own files, unchanged, as published on npm; nothing else is taken from them.

| Directory | npm package | Version | Licence | Files |
|---|---|---|---|---|
| \`swagger-ui/\` | \`swagger-ui-dist\` | $SWAGGER_UI_VERSION | $(license swagger-ui) (\`LICENSE\`, \`NOTICE\`) | \`swagger-ui-bundle.js\`, \`swagger-ui.css\`, \`favicon-32x32.png\` (also the favicon of \`/redoc\`); third-party notices in \`swagger-ui-bundle.js.LICENSE.txt\` |
| \`redoc/\` | \`redoc\` | $REDOC_VERSION | $(license redoc) (\`LICENSE\`) | \`redoc.standalone.js\` (\`bundles/\` in the package); third-party notices in \`redoc.standalone.js.LICENSE.txt\` |

The map of \`/ui/\` lays out with dagre, served at \`/ui/vendor/dagre/\` (\`app/routes/ui.py\`); see
\`dagre/README.md\` for its version, licence and how to refresh it.

Refresh or upgrade them (needs \`npm\`; rewrites this file) with one command:

    SWAGGER_UI_VERSION=$SWAGGER_UI_VERSION REDOC_VERSION=$REDOC_VERSION scripts/vendor_docs_assets.sh

Source maps are left out (the bundles' \`sourceMappingURL\` comments only matter to a
browser's developer tools, which then show a 404 for the map). SHA-256 of each file:

$sums
README
echo "vendored swagger-ui-dist@$SWAGGER_UI_VERSION and redoc@$REDOC_VERSION into $vendor"
du -ab "$vendor" | sort -k2
