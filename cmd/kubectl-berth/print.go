package main

import (
	"fmt"
	"slices"
	"sort"
	"strings"

	"github.com/spf13/cobra"
	"k8s.io/cli-runtime/pkg/genericclioptions"
	"k8s.io/cli-runtime/pkg/printers"
)

// printFlags is -o as kubectl has it (cli-runtime's flag sets and
// printers), less the go-template formats: text/template's method calls
// make Go's linker keep every exported method of every type linked in,
// which made kubectl-berth 59 MB instead of 34 (all of client-go's apply
// configurations). table is the default: the plugin's own tables.
type printFlags struct {
	output   string
	jsonYAML *genericclioptions.JSONYamlPrintFlags
	name     *genericclioptions.NamePrintFlags
	jsonPath *genericclioptions.JSONPathPrintFlags
}

func newPrintFlags() *printFlags {
	return &printFlags{
		output:   "table",
		jsonYAML: genericclioptions.NewJSONYamlPrintFlags(),
		name:     genericclioptions.NewNamePrintFlags(""),
		jsonPath: genericclioptions.NewJSONPathPrintFlags("", true),
	}
}

// formats are -o's values: table, then cli-runtime's.
func (f *printFlags) formats() []string {
	out := append([]string{"table"}, f.jsonYAML.AllowedFormats()...)
	out = append(out, f.name.AllowedFormats()...)
	return append(out, f.jsonPath.AllowedFormats()...)
}

func (f *printFlags) addFlags(cmd *cobra.Command) {
	f.jsonYAML.AddFlags(cmd)
	f.jsonPath.AddFlags(cmd)
	cmd.Flags().StringVarP(&f.output, "output", "o", f.output, fmt.Sprintf("Output format. One of: (%s).", strings.Join(f.formats(), ", ")))
	if err := cmd.RegisterFlagCompletionFunc("output", func(_ *cobra.Command, _ []string, toComplete string) ([]string, cobra.ShellCompDirective) {
		return withPrefix(f.formats(), toComplete), cobra.ShellCompDirectiveNoFileComp
	}); err != nil {
		panic(err) // the flag was just added
	}
}

// table says whether the plugin prints its own table.
func (f *printFlags) table() bool { return f.output == "table" }

// printer is the printer of -o (not table), or the error kubectl gives for
// a format it has no printer for.
func (f *printFlags) printer() (printers.ResourcePrinter, error) {
	for _, to := range []func(string) (printers.ResourcePrinter, error){f.jsonYAML.ToPrinter, f.name.ToPrinter, f.jsonPath.ToPrinter} {
		if p, err := to(f.output); !genericclioptions.IsNoCompatiblePrinterError(err) {
			return p, err
		}
	}
	allowed := slices.Clone(f.formats())
	sort.Strings(allowed)
	return nil, genericclioptions.NoCompatiblePrinterError{OutputFormat: &f.output, AllowedFormats: allowed}
}
