'use strict';
// Mocha's spec reporter, closed by the line CI reads: "N passed, N failed".
const Mocha = require('mocha');

const { Spec } = Mocha.reporters;
const { EVENT_RUN_END } = Mocha.Runner.constants;

class SummaryReporter extends Spec {
  constructor(runner, options) {
    super(runner, options);
    runner.once(EVENT_RUN_END, () => {
      const { passes, failures, pending } = runner.stats ?? this.stats;
      const skipped = pending > 0 ? `${pending} skipped\n` : '';
      // Printed after the spec reporter's own epilogue, so it is the last line, exactly as CI reads it.
      process.nextTick(() => process.stdout.write(`${skipped}${passes} passed, ${failures} failed\n`));
    });
  }
}

module.exports = SummaryReporter;
