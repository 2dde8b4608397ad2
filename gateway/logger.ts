import winston from 'winston';

/** The service's one log sink: one line per entry, errors with their stack; `label` names the process (e.g. `worker 2`). */
export function createLogger(level: string, label?: string): winston.Logger {
  return winston.createLogger({
    level,
    format: winston.format.combine(
      winston.format.timestamp(),
      winston.format.errors({ stack: true }),
      winston.format.printf(({ timestamp, level: entryLevel, message, stack, ...meta }) => {
        const extra = Object.keys(meta).length > 0 ? ` ${JSON.stringify(meta)}` : '';
        const origin = label ? ` [${label}]` : '';
        return `${timestamp} ${entryLevel}${origin} ${message}${extra}${stack ? `\n${stack}` : ''}`;
      }),
    ),
    transports: [new winston.transports.Console()],
  });
}
