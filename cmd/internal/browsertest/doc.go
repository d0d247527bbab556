// Package browsertest holds the admin console's browser tests: headless
// Chromium (Debian's chromium package, scripts/chromium.sh) driven by
// chromedp against real kece-control and kece-node processes built from this
// tree, on the test MariaDB servers. It has no code of its own; see
// console_test.go. KECE_REQUIRE_BROWSER=1 turns a missing Chromium into a
// failure; KECE_SCREENSHOT_DIR keeps the screenshots (make screenshots).
package browsertest
