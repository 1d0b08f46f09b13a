package org.jgpy.interop;

import java.io.FileDescriptor;
import java.io.FileInputStream;
import java.io.FilterInputStream;
import java.io.InputStream;
import java.lang.reflect.Method;
import java.util.Arrays;

/**
 * Runs a jar demo's main (first argument: its class; the rest: its arguments) with stdin readable from a pipe.
 * 2.12's Util.readStringFromStdin discards type-ahead with System.in.skip(System.in.available()), and
 * FileInputStream.skip on a pipe throws "Illegal seek" (lseek; even for 0 bytes). Here System.in reports nothing
 * available and skips by reading, so that skip does nothing; the demo's code is otherwise unchanged. The driver
 * types one command at a time and waits for its output (the demo reads each line with a new BufferedReader,
 * which would drop a second line already in the pipe).
 */
public final class PipedStdin {
    private PipedStdin() {}

    public static void main(String[] args) throws Exception {
        InputStream in=new FilterInputStream(new FileInputStream(FileDescriptor.in)) {
            @Override public int available() { return 0; }

            @Override public long skip(long n) throws java.io.IOException {
                long skipped=0;
                while(skipped < n && read() >= 0)
                    skipped++;
                return skipped;
            }
        };
        System.setIn(in);
        Method main=Class.forName(args[0]).getMethod("main", String[].class);
        main.invoke(null, (Object)Arrays.copyOfRange(args, 1, args.length));
    }
}
