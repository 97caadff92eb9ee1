-- Issue 21 point 6: failed logins are throttled with delays that double per failure, counted from the
-- last failure of each key (src/auth/login-throttle.ts); the window still opens at the first failure.
-- Keys: 'pair:<identity>\n<address>', 'id:<identity>', 'ip:<address>'; rows of the older 'id:<kind>:...'
-- form simply age out.
alter table auth_login_failures add column last_failed_at timestamptz;
update auth_login_failures set last_failed_at = window_started_at;
alter table auth_login_failures alter column last_failed_at set not null, alter column last_failed_at set default now();
