// Package structure holds no code: its test keeps the rules CONTRIBUTING.md
// sets for the code's shape (file and function sizes, exported methods per
// type, a Validate on every Config, a reason beside every sleep in a test),
// so a change that breaks one fails `make test` instead of waiting for a
// reader to notice.
package structure
