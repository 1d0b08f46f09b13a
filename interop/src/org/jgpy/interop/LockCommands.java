package org.jgpy.interop;

import java.util.ArrayList;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.locks.Lock;

import org.jgroups.JChannel;
import org.jgroups.blocks.locking.LockService;

/**
 * The harness's lock commands: 2.12's LockService on the node's channel (its stack needs CENTRAL_LOCK or
 * PEER_LOCK). Commands run on the harness's one worker thread, which therefore owns the locks, as an
 * application thread would. Times are System.nanoTime() (CLOCK_MONOTONIC: comparable with Python's).
 */
final class LockCommands {
    private JChannel channel;
    private LockService service;

    Object dispatch(String name, Map<String,Object> cmd, JChannel ch) throws Exception {
        if(ch != channel) {
            channel=ch;
            service=new LockService(ch);
        }
        switch(name) {
            case "lock": {
                Lock l=lock(cmd);
                boolean ok=acquire(l, cmd);
                return Json.obj("acquired", ok, "ns", System.nanoTime());
            }
            case "unlock":
                lock(cmd).unlock();
                return Json.obj("ns", System.nanoTime());
            case "unlock_all":
                service.unlockAll();
                return Json.obj();
            case "print_locks":
                return Json.obj("locks", service.printLocks());
            case "lock_loop": {        // count times: acquire, hold hold_ms, release; the held intervals
                Lock l=lock(cmd);
                int count=Codec.toInt(cmd.get("count"), "count");
                long hold=cmd.get("hold_ms") != null ? Codec.toLong(cmd.get("hold_ms"), "hold_ms") : 0;
                List<Object> held=new ArrayList<Object>();
                int failed=0;
                for(int i=0; i < count; i++) {
                    if(!acquire(l, cmd)) {
                        failed++;
                        continue;
                    }
                    long t0=System.nanoTime();
                    if(hold > 0)
                        Thread.sleep(hold);
                    long t1=System.nanoTime();
                    l.unlock();
                    List<Object> pair=new ArrayList<Object>();
                    pair.add(t0);
                    pair.add(t1);
                    held.add(pair);
                }
                return Json.obj("held", held, "failed", failed);
            }
        }
        throw new IllegalArgumentException("unknown lock command '" + name + "'");
    }

    private Lock lock(Map<String,Object> cmd) {
        String name=Codec.toStr(cmd.get("name"), "name");
        if(name == null) throw new IllegalArgumentException("a lock command needs a name");
        return service.getLock(name);
    }

    /** lock() ; with "timeout_ms": tryLock(timeout) ; with "try": true: tryLock(). */
    private static boolean acquire(Lock l, Map<String,Object> cmd) throws InterruptedException {
        if(cmd.get("timeout_ms") != null)
            return l.tryLock(Codec.toLong(cmd.get("timeout_ms"), "timeout_ms"), TimeUnit.MILLISECONDS);
        if(cmd.get("try") != null && Codec.toBool(cmd.get("try"), "try"))
            return l.tryLock();
        l.lock();
        return true;
    }
}
