// Outgoing email behind a small interface: deployments plug in their transport; the default development
// mailer writes the message to the log instead of delivering it (tests pass a capturing mailer).
import type { Logger } from '../log.js';

export interface MailMessage {
  to: string;
  subject: string;
  text: string;
}

export interface Mailer {
  send(message: MailMessage): Promise<void>;
}

export function createLogMailer(log: Logger): Mailer {
  return {
    async send(message) {
      log.info('mail not delivered (development mailer logs it instead)', { to: message.to, subject: message.subject, text: message.text });
    },
  };
}
