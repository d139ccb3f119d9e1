// Package validation checks Berth's internal plugin args. kube-scheduler
// validates only its in-tree args, so each plugin's New calls its
// Validate<Name>Args and refuses to start on an error; errors carry full
// field paths so the message names the field.
package validation
