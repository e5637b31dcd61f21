"""The report view: one lint's inventory and probe report as the questions checks, the fixer and the
reporters share. Imports nothing from checks/, fixer/ or reporters/."""
