// Package archtest holds no code, only a test that keeps the structure of
// the module as the design's style notes describe it: a documented package for each
// concern, a pure session core, process-wide effects only in main.
package archtest
