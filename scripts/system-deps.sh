#!/usr/bin/env bash
# Installs the system packages the checks need when the machine lacks them:
# a JDK for Spark (pyspark runs a JVM), Node.js + npm for the ali-ons conformance client and
# a C compiler for rocketstore's extension (rocketstore/format/_native_c/), and chromium with
# its driver for the web console's browser test.
# Uses apt-get (as root, or through sudo); on other systems it says what is missing.
set -euo pipefail
missing=()
command -v java >/dev/null 2>&1 || [ -n "${JAVA_HOME:-}" ] || missing+=(openjdk-17-jre-headless)
command -v node >/dev/null 2>&1 || missing+=(nodejs)
command -v npm >/dev/null 2>&1 || missing+=(npm)
command -v cc >/dev/null 2>&1 || missing+=(gcc)
# The console's browser test (tests/console/test_browser.py): Debian's chromium and driver.
command -v chromium >/dev/null 2>&1 || missing+=(chromium)
command -v chromedriver >/dev/null 2>&1 || missing+=(chromium-driver)
[ ${#missing[@]} -eq 0 ] && exit 0
if ! command -v apt-get >/dev/null 2>&1; then
  echo "system-deps: please install: ${missing[*]} (no apt-get here)" >&2
  exit 1
fi
sudo=""
[ "$(id -u)" -eq 0 ] || sudo="sudo"
echo "system-deps: installing ${missing[*]}"
$sudo apt-get update -qq
DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq --no-install-recommends "${missing[@]}"
